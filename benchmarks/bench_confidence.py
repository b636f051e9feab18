"""How well mt's confidence predicts a translation's quality, and what it costs.

    python -m benchmarks.bench_confidence RUN [--cal SRC REF] [--test NAME SRC REF ...]
        [--threshold 50] [--plot FILE.png] [--rounds 2] [--cost-lines 500]
    python -m benchmarks.bench_confidence RUN --cost [--beam 5] [--cost-lines 500] [--rounds 2]
    python -m benchmarks.bench_confidence RUN --smoke   # the toy corpus: does it still run?

A copy of RUN (its checkpoint, config and vocabularies, in a temporary directory: RUN may be
read-only) is calibrated on --cal (default Multi30k val; `mt calibrate`), then each --test set
(default test_2016_flickr) is translated once with decode.confidence on and each line scored
with sentence chrF against its reference. Printed per test set: Pearson and Spearman
correlation with sentence chrF of the confidence and of each feature (sign as measured), the
expected calibration error of P(chrF >= threshold) over 10 bins, the BLEU of the most
confident X% of the lines against X (and of a random X%, the mean of 20 draws), and the
calibration curve (--plot draws it, with matplotlib). Then the cost: translating the first
--cost-lines lines of the first test set with and without decode.confidence, one thread,
taking turns for --rounds rounds, each keeping its best. Test sets are for reporting: choices
(threshold, features) are made on the calibration set.

--cost measures the cost alone (no calibration, no quality): confidence off and on side by
side, in alternating rounds, the fastest of each and their ratio, at --beam (default the
run's).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from sacrebleu.metrics import BLEU, CHRF

from benchmarks.harness import MULTI30K, TOY, alternate, markdown, parse, parser
from mt.commands.calibrate import calibrate
from mt.commands.options import TranslateOptions
from mt.confidence import FEATURES, ece, spearman
from mt.data import read_parallel
from mt.translator import Translator

KEEP = (100, 90, 80, 70, 60, 50, 30)  # X: the share of lines kept, most confident first


def copy_run(run: Path, dest: Path) -> Path:
    """The run's checkpoint (best.pt of a directory) and the files beside it, not last.pt."""
    ckpt = run / "best.pt" if run.is_dir() else run
    for f in ckpt.parent.iterdir():
        if f.is_file() and (f == ckpt or f.suffix in (".yaml", ".txt", ".model", ".json")):
            shutil.copy(f, dest / f.name)
    return dest / ckpt.name


def kept_bleu(hyps: list[str], refs: list[str], order: np.ndarray) -> list[float]:
    """Corpus BLEU of the first X% of the lines in `order`, for each X of KEEP."""
    bleu = BLEU(tokenize="13a")
    out = []
    for x in KEEP:
        top = order[: max(1, round(len(order) * x / 100))]
        out.append(bleu.corpus_score([hyps[i] for i in top], [[refs[i] for i in top]]).score)
    return out


def measure(translator: Translator, name: str, src: Path, ref: Path, threshold: float,
            plot: str | None) -> dict:
    src_lines, ref_lines = read_parallel(src, ref)
    found = [b[0] for b in translator.translate_nbest_stream(src_lines, False)]
    chrf = CHRF()
    scores = np.array([chrf.sentence_score(t.text, [r]).score for t, r in zip(found, ref_lines)])
    conf = np.array([t.confidence for t in found])
    rows = [("confidence", conf)] + [(k, np.array([t.features[k] for t in found]))
                                     for k in FEATURES]
    corr = [(k, float(np.corrcoef(v, scores)[0, 1]), spearman(v, scores)) for k, v in rows]
    hyps = [t.text for t in found]
    by_conf = kept_bleu(hyps, ref_lines, np.argsort(-conf, kind="stable"))
    rng = np.random.default_rng(0)
    rand = np.mean([kept_bleu(hyps, ref_lines, rng.permutation(len(hyps)))
                    for _ in range(20)], axis=0)
    good = scores >= threshold
    bins = np.minimum((conf * 10).astype(int), 9)
    curve = [(k / 10, int((bins == k).sum()), float(conf[bins == k].mean()),
              float(good[bins == k].mean())) for k in range(10) if (bins == k).any()]
    print(f"\n## {name}: {len(found)} lines, {100 * good.mean():.1f}% at or above chrF "
          f"{threshold:g}; ECE {ece(conf, good):.3f}\n")
    print(markdown(["signal", "Pearson", "Spearman"],
                   [(k, f"{p:.3f}", f"{s:.3f}") for k, p, s in corr]))
    print()
    print(markdown(["kept X%", *map(str, KEEP)],
                   [["BLEU, most confident first", *(f"{b:.2f}" for b in by_conf)],
                    ["BLEU, random (mean of 20)", *(f"{b:.2f}" for b in rand)]]))
    print()
    print(markdown(["bin", "lines", "mean confidence", "share good"],
                   [(f"{lo:.1f}-{lo + 0.1:.1f}", n, f"{c:.3f}", f"{g:.3f}")
                    for lo, n, c, g in curve]))
    if plot:
        draw(curve, name, plot)
    return {"lines": len(found)}


def draw(curve: list, name: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 4))
    ax.plot([0, 1], [0, 1], ls=":", c="grey", label="perfect")
    ax.plot([c for _, _, c, _ in curve], [g for *_, g in curve], marker="o", label=name)
    ax.set_xlabel("predicted P(chrF ≥ threshold)")
    ax.set_ylabel("observed share")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"calibration curve: {path}")


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__, rounds=2, smoke="the toy run's val and test, 1 round, 50 lines")
    ap.add_argument("run", type=Path)
    ap.add_argument("--cal", nargs=2, type=Path,
                    default=[MULTI30K / "val.de.gz", MULTI30K / "val.en.gz"])
    ap.add_argument("--test", nargs=3, action="append", metavar=("NAME", "SRC", "REF"))
    ap.add_argument("--threshold", type=float, default=50.0)
    ap.add_argument("--plot", help="the calibration curve of the first test set, as PNG")
    ap.add_argument("--cost-lines", type=int, default=500)
    ap.add_argument("--cost", action="store_true", help="only the cost: on against off")
    ap.add_argument("--beam", type=int, help="the beam of the cost's translations")
    # the toy model translates val perfectly: other lines' references give both classes
    smoke = {"cal": [TOY / "toy.val.en", TOY / "toy.test.de"], "rounds": 1, "cost_lines": 50,
             "test": [["toy.test", TOY / "toy.test.en", TOY / "toy.test.de"]]}
    args = parse(ap, smoke, argv)
    tests = args.test or [["test_2016_flickr", MULTI30K / "test_2016_flickr.de.gz",
                           MULTI30K / "test_2016_flickr.en.gz"]]
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = copy_run(args.run, Path(tmp))
        if args.cost:
            cost(ckpt, tests[0], args)
            return
        options = TranslateOptions("cpu", threads=1)
        r = calibrate(ckpt, str(args.cal[0]), str(args.cal[1]), options, args.threshold)
        print(f"calibrated on {args.cal[0]}: {r['lines']} lines, {100 * r['positives']:.1f}% "
              f"good; in-sample ECE {r['ece']:.3f}, Spearman {r['spearman']:.3f}")
        translator = Translator.load(ckpt, "cpu", threads=1, confidence=True)
        for i, (name, src, ref) in enumerate(tests):
            measure(translator, name, Path(src), Path(ref), args.threshold,
                    args.plot if i == 0 else None)
        cost(ckpt, tests[0], args)


def cost(ckpt: Path, test: list, args) -> None:
    """Translate the first --cost-lines lines of a test set with decode.confidence off and on,
    one thread, in turns for --rounds rounds; print the fastest of each and their ratio, in
    wall-clock time and in the process's CPU time (which time spent waiting for a core shared
    with other processes does not inflate)."""
    lines = read_parallel(Path(test[1]), Path(test[2]))[0][: args.cost_lines]
    beam = {} if args.beam is None else {"beam": args.beam}
    plain = Translator.load(ckpt, "cpu", threads=1, **beam)
    sure = Translator.load(ckpt, "cpu", threads=1, confidence=True, **beam)

    def both(translator: Translator):
        def run(r: int) -> tuple[float, float]:
            wall, cpu = time.perf_counter(), time.process_time()
            list(translator.translate_nbest_stream(lines, False))
            return time.perf_counter() - wall, time.process_time() - cpu
        return run

    best = alternate({"off": both(plain), "on": both(sure)}, args.rounds,
                     keep=lambda a, b: (min(a[0], b[0]), min(a[1], b[1])))
    print(f"\ncost: {len(lines)} lines of {test[0]}, beam {plain.decode_cfg.beam}, one "
          f"thread, fastest of {args.rounds} alternating rounds, confidence off -> on:")
    for i, what in enumerate(("wall-clock", "CPU time")):
        off, on = best["off"][i], best["on"][i]
        print(f"  {what}: {off:.2f} s -> {on:.2f} s: {on / off:.3f}x "
              f"({100 * (on / off - 1):+.1f}%)")

if __name__ == "__main__":
    main()
