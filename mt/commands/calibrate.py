"""`mt calibrate`: fit a run's confidence (mt.confidence) on a held-out set and keep it in the
run directory, where every command that translates with decode.confidence finds it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sacrebleu.metrics import CHRF
from tqdm import tqdm

from mt import confidence
from mt.commands.options import TranslateOptions
from mt.data import read_parallel
from mt.errors import DataError

MIN_LINES = 100  # fewer held-out lines than this fit noise, not the model's errors


def calibrate(run_path: Path, src: str, ref: str, options: TranslateOptions = TranslateOptions(),
              threshold: float = 50.0) -> dict:
    """Translate src (decode.confidence on), score each line's chrF against ref, fit
    P(chrF >= threshold) on the features, save it beside the run's checkpoint; returns what
    was fitted and how it ranks the held-out lines (in-sample)."""
    if not 0 < threshold < 100:
        raise DataError(f"--threshold {threshold}: a sentence chrF between 0 and 100")
    translator = options.load(run_path, confidence=True)
    run = translator.run
    src_lines, ref_lines = read_parallel(Path(src), Path(ref))
    kept = [i for i, s in enumerate(src_lines) if s.strip()]
    if len(kept) < MIN_LINES:
        raise DataError(f"{src}: {len(kept)} non-empty lines; calibrating needs at least "
                        f"{MIN_LINES} held-out lines (a few hundred or more is better)")
    lines = [src_lines[i] for i in kept]
    stream = translator.translate_nbest_stream(lines, False)
    found = [best[0] for best in tqdm(stream, total=len(lines), desc="calibrate",
                                      unit=" lines", disable=None, file=sys.stderr)]
    chrf = CHRF()
    scores = [chrf.sentence_score(t.text, [ref_lines[i]]).score
              for i, t in zip(kept, found, strict=True)]
    if problem := one_sided(scores, threshold):
        raise DataError(f"{src}: {problem}")
    feats = [t.features for t in found]
    cal = confidence.calibrate(feats, scores, threshold, checkpoint=run.checkpoint.name,
                               step=run.step, data=f"{src} {ref}",
                               fingerprint=confidence.weights_fingerprint(run.checkpoint))
    path = cal.save(run.checkpoint.parent)
    probs = np.array(cal.predict(feats))
    return {"path": str(path), "lines": cal.lines, "threshold": threshold,
            "positives": cal.positives, "ece": confidence.ece(probs, np.array(scores) >= threshold),
            "spearman": confidence.spearman(probs, np.array(scores))}


def one_sided(scores: list[float], threshold: float) -> str | None:
    """What a set whose lines all fall on one side of the threshold lacks, and what to give
    instead (None: lines on both sides, something to fit). A --threshold is advice only when
    the scores differ: one that equals every line's splits nothing."""
    good = sum(s >= threshold for s in scores)
    if good not in (0, len(scores)):
        return None
    low, high = min(scores), max(scores)
    side, other = ("every", "below") if good else ("no", "at or above")
    problem = (f"{side} line reaches chrF {threshold:g}, so the set has no line {other} it to "
               "tell apart from the rest")
    harder = "a harder held-out set" if good else ("an easier held-out set (or check that "
                                                   "--ref is --src's reference)")
    if low == high:
        return f"{problem} (every line scores {low:.1f}); give {harder}"
    where = "above some" if good else "at or below some"
    return (f"{problem}; give {harder}, or a --threshold {where} lines' scores (they range "
            f"from {low:.1f} to {high:.1f})")


def report(r: dict) -> str:
    """calibrate's result as one line (without --json)."""
    return (f"calibration: {r['path']} ({r['lines']} lines, {100 * r['positives']:.1f}% at or "
            f"above chrF {r['threshold']:g}; on those lines: ECE {r['ece']:.3f}, Spearman "
            f"{r['spearman']:.3f} with chrF)")
