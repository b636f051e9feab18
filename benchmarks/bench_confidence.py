"""How well mt's confidence predicts a translation's quality, and what it costs.

    python -m benchmarks.bench_confidence RUN [--cal SRC REF] [--test NAME SRC REF ...]
        [--threshold 50] [--plot FILE.png] [--rounds 2] [--cost-lines 500]
    python -m benchmarks.bench_confidence RUN --cost [--beam 5] [--cost-lines 500]
        [--cost-chunk 60] [--rounds 2]
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
side, chunk by chunk in alternating rounds, the fastest of each and their ratio, at --beam
(default the run's).
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
from mt.confidence import FEATURES, ece, features, spearman
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
    ap.add_argument("--cost-chunk", type=int, default=60,
                    help="lines translated off and on in turns (the cost)")
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
        options = TranslateOptions(device="cpu", threads=1)
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
    one thread; print the time of each and their ratio, in wall-clock time and in the
    process's CPU time (which waiting for a core shared with other processes does not
    inflate).

    The lines go in chunks of --cost-chunk (about a decoding batch each, a second or so to
    translate); each chunk is translated off and on in turns for --rounds rounds, and each
    keeps its fastest: short turns leave noise on a shared machine fewer places to land
    unevenly than whole runs of minutes. A contender's time is the sum of its fastest per
    chunk."""
    lines = read_parallel(Path(test[1]), Path(test[2]))[0][: args.cost_lines]
    beam = {} if args.beam is None else {"beam": args.beam}
    plain = Translator.load(ckpt, "cpu", threads=1, **beam)
    sure = Translator.load(ckpt, "cpu", threads=1, confidence=True, **beam)

    def both(translator: Translator, chunk: list[str]):
        def run(r: int) -> tuple[float, float]:
            wall, cpu = time.perf_counter(), time.process_time()
            list(translator.translate_nbest_stream(chunk, False))
            return time.perf_counter() - wall, time.process_time() - cpu
        return run

    total = {"off": np.zeros(2), "on": np.zeros(2)}
    for at in range(0, len(lines), args.cost_chunk):
        chunk = lines[at: at + args.cost_chunk]
        best = alternate({"off": both(plain, chunk), "on": both(sure, chunk)}, args.rounds,
                         keep=lambda a, b: (min(a[0], b[0]), min(a[1], b[1])))
        for name, t in best.items():
            total[name] += t
    print(f"\ncost: {len(lines)} lines of {test[0]}, beam {plain.decoding.beam}, one "
          f"thread, chunks of {args.cost_chunk}, each the fastest of {args.rounds} alternating "
          "rounds; confidence off -> on:")
    for i, what in enumerate(("wall-clock", "CPU time")):
        off, on = total["off"][i], total["on"][i]
        print(f"  {what}: {off:.2f} s -> {on:.2f} s: {on / off:.3f}x "
              f"({100 * (on / off - 1):+.1f}%)")
    searches(plain, lines, args)


def searches(translator: Translator, lines: list[str], args) -> None:
    """The search alone, on the same chunks and in the same turns: plain, recording the
    confidence's features (trace), and plain followed by the teacher-forced pass that gave
    them before (mt.confidence.features over the search's encoder output)."""
    total = {k: np.zeros(2) for k in ("plain", "traced", "plain + teacher-forced pass")}
    for at in range(0, len(lines), args.cost_chunk):
        best = alternate(search_contenders(translator, lines[at: at + args.cost_chunk]),
                         args.rounds, keep=lambda a, b: (min(a[0], b[0]), min(a[1], b[1])))
        for name, t in best.items():
            total[name] += t
    base = total["plain"]
    print("  the search alone (wall-clock, CPU time), against plain:")
    for name, t in total.items():
        print(f"    {name}: {t[0]:.2f} s, {t[1]:.2f} s: {t[0] / base[0]:.3f}x, "
              f"{t[1] / base[1]:.3f}x")


def search_contenders(translator: Translator, lines: list[str]) -> dict:
    """alternate()'s contenders for one chunk of lines: each measures (wall, CPU) seconds."""
    from mt.data import pad
    from mt.decoding.request import SearchRequest

    model, cfg, engine = translator.model, translator.decoding, translator.engine
    toks = translator.src_tok.tokenize_many(lines)
    src = pad([translator.run.src_vocab.encode(t) for t in toks if t])
    with torch.no_grad():
        memory = model.encode(src, model.src_mask(src))
    plain, traced = SearchRequest(src, cfg, memory=memory), SearchRequest(src, cfg, memory=memory,
                                                                         trace=True)
    outputs = [h.tokens for hyps in engine.search(plain) for h in hyps]

    def timed(fn):
        def run(r: int) -> tuple[float, float]:
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            return time.perf_counter() - wall, time.process_time() - cpu
        return run

    def forced() -> None:
        engine.search(plain)
        features(model, src, outputs, 0, memory)

    return {"plain": timed(lambda: engine.search(plain)),
            "traced": timed(lambda: engine.search(traced)),
            "plain + teacher-forced pass": timed(forced)}

if __name__ == "__main__":
    main()
