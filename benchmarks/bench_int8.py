"""int8 decoding against CTranslate2 int8, side by side: mt in float32, bf16 and int8
(decode.dtype) and CTranslate2's int8 export of the same weights, greedy and beam search, at
each thread count; sentences/s and BLEU. With --students, each student run (mt distill)
decodes greedily in each dtype beside them, against RUN (the teacher) with beam search in
float32: its speed ratio, BLEU difference, layers, d_model and size. With --shortlist, each of
mt's contenders also decodes over the run's lexical shortlist (decode.shortlist on), and
CTranslate2 over the same table as its vocabulary map (use_vmap). With --batch-tokens N,N each
contender decodes at each decode.batch_tokens, and mt's best is set against CTranslate2's best,
each at its own fastest size.

    python -m benchmarks.bench_int8 RUN [--src FILE --ref FILE] [--limit N] [--beam 5]
        [--threads 1,2] [--rounds 3] [--dtypes float32,bf16,int8] [--students RUN,RUN]
        [--shortlist] [--streams] [--processes] [--batch-tokens N,N]
    python -m benchmarks.bench_int8 RUN --smoke     # 16 toy sentences, 1 round, no CTranslate2

Defaults to Multi30k test_2016_flickr (1000 sentences, de -> en). Contenders take turns, each
keeps its fastest round (noise only ever adds time); times include tokenizing. CTranslate2
(the `ctranslate2` extra) is skipped when it is not installed. Run by hand on an idle machine.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import multiprocessing
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from benchmarks.bench_decode import add_test_set_args, ct2_translators, read_test_set, timed
from benchmarks.harness import TOY, cpu_model, markdown, parse, parser
from mt.checkpoint import load_run
from mt.config import override
from mt.decoding.precision import inference_layout
from mt.device import pick_device
from mt.metrics import score
from mt.threads import Streams
from mt.translator import Translator


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__, rounds=3, smoke="the first 16 toy test sentences (en -> de), beam 2, "
               "1 round, no CTranslate2")
    add_test_set_args(p)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    p.add_argument("--dtypes", default="float32,bf16,int8", help="mt's decode.dtype contenders")
    p.add_argument("--no-ct2", action="store_true", help="leave CTranslate2 out")
    p.add_argument("--batch-tokens", default="",
                   help="decode.batch_tokens, comma-separated: each contender at each, "
                   "CTranslate2 too, named '@N' (default: the run's)")
    p.add_argument("--students", default="", help="student runs, comma-separated")
    p.add_argument("--streams", action="store_true",
                   help="at N threads, N streams of one thread each, as `mt translate` runs "
                   "on N cores (mt.threads.Streams), and CTranslate2 as N replicas of one "
                   "thread (inter_threads N); else one stream of N threads each")
    p.add_argument("--processes", action="store_true",
                   help="at N > 1 threads, each of mt's contenders also as N processes of one "
                   "thread each, the lines shared out in N parts, as `mt translate --workers N` "
                   "runs (a pool started once, its models loaded once)")
    p.add_argument("--shortlist", action="store_true",
                   help="each contender also over the run's lexical shortlist (CTranslate2: "
                   "its vocabulary map)")
    args = parse(p, {"src": TOY / "toy.test.en", "ref": TOY / "toy.test.de", "limit": 16,
                     "beam": 2, "rounds": 1, "threads": "1", "no_ct2": True}, argv)

    device = pick_device("cpu")
    run = load_run(args.run, device)
    inference_layout(run.model)
    src, ref = read_test_set(args)
    if args.shortlist and run.shortlist is None:
        sys.exit(f"{args.run}: no lexical shortlist to time; learn one: mt shortlist RUN")
    searches = {"greedy": "decode.beam=1", f"beam {args.beam}": f"decode.beam={args.beam}"}
    sizes = [int(b) for b in args.batch_tokens.split(",") if b]
    # each search at each batch size, named "... @N" where there are several
    at = {f" @{b}" if len(sizes) > 1 else "": [f"decode.batch_tokens={b}"] for b in sizes}
    cfgs = {f"{k}{tail}": override(run.cfg, ["decode.nbest=1", "decode.shortlist=off", *size,
                                             v], "bench").decode
            for tail, size in (at or {"": []}).items() for k, v in searches.items()}
    if args.shortlist:  # the same searches over the shortlist, named "... listed"
        cfgs |= {f"listed {k}": dataclasses.replace(c, shortlist="on") for k, c in cfgs.items()}
    dtypes = [d for d in args.dtypes.split(",") if d]
    mine = {(d, k): Translator(run, dataclasses.replace(c, dtype=d), device)
            for d in dtypes for k, c in cfgs.items()}
    students = {}
    for path in (Path(s) for s in args.students.split(",") if s):
        student = load_run(path, device)
        inference_layout(student.model)
        greedy = override(student.cfg, ["decode.nbest=1", "decode.beam=1"], "bench").decode
        for d in dtypes:
            students[(path, d)] = Translator(student, dataclasses.replace(greedy, dtype=d),
                                             device)
    use_ct2 = not args.no_ct2
    if use_ct2:
        try:
            from mt.ct2.export import write_model
        except ImportError:
            use_ct2 = False
    tmp = tempfile.TemporaryDirectory(prefix="bench-int8-")
    if use_ct2:
        write_model(run, Path(tmp.name), "int8")
    print(f"checkpoint {args.run} (step {run.step}); {len(src)} sentences from {args.src}; "
          f"fastest of {args.rounds} rounds; {cpu_model()}")
    rows, notes = [], []
    for n in [int(t) for t in args.threads.split(",") if t]:
        each = 1 if args.streams else n  # threads of each stream
        torch.set_num_threads(each)
        streams = Streams(n, 1) if args.streams else Streams()
        for tr in [*mine.values(), *students.values()]:
            tr.streams = streams
        contenders = {f"mt {d} {k}": (tr.translate, src) for (d, k), tr in mine.items()}
        pool = None
        if args.processes and n > 1:
            pool = Processes(args.run, n, {(d, k): tr.decoding for (d, k), tr in mine.items()})
            contenders |= {f"mt {d} {k} x{n} processes": (pool.translator((d, k)), src)
                           for d, k in mine}
        for (path, d), tr in students.items():
            contenders[f"student {path.name} {d} greedy"] = (tr.translate, src)
        if use_ct2:
            for (_, k), tr in ct2_translators(
                    run, cfgs, each, device, {"int8": Path(tmp.name)},
                    streams if args.streams else None).items():
                contenders[f"CTranslate2 int8 {k}"] = (tr.translate, src)
        models = [tr.model for tr in [*mine.values(), *students.values()]]
        results = timed(contenders, models, device, args.rounds)
        if pool is not None:
            pool.pool.shutdown()
        rate = {name: len(src) / results[name][1] for name in contenders}
        out = {name: results[name][0] for name in contenders}
        bleu = {name: score(out[name], ref)["bleu"] for name in contenders}
        for name in contenders:
            rows.append([n, name, f"{rate[name]:.1f}", f"{bleu[name]:.2f}"])
        for k in cfgs:
            if "int8" in dtypes and "float32" in dtypes:
                a, b = out[f"mt int8 {k}"], out[f"mt float32 {k}"]
                same = sum(x == y for x, y in zip(a, b, strict=True))
                notes.append(f"{n} thread(s) {k}: int8 - float32 BLEU "
                             f"{bleu[f'mt int8 {k}'] - bleu[f'mt float32 {k}']:+.2f} (target "
                             f"within 0.3), outputs identical {same}/{len(a)}")
            for d in dtypes:
                if use_ct2:
                    notes.append(f"{n} thread(s) {k}: mt {d} / CTranslate2 int8 sentences/s "
                                 f"{rate[f'mt {d} {k}'] / rate[f'CTranslate2 int8 {k}']:.2f}")
        if use_ct2:  # issue 60's targets: mt's best mode against CTranslate2 int8's, each
            for k in searches:  # at its best batch size
                ct2 = {"": fastest(rate, f"CTranslate2 int8 {k}", k)}
                if args.shortlist:
                    ct2["with its vocabulary map "] = fastest(
                        rate, f"CTranslate2 int8 listed {k}", k)
                best = fastest(rate, "mt ", k)
                for what, theirs in ct2.items():
                    notes.append(f"{n} thread(s) {k}: mt's best ({best}) / CTranslate2 int8 "
                                 f"{what}({theirs}) {rate[best] / rate[theirs]:.2f}")
        teacher = f"mt float32 beam {args.beam}{next(iter(at), '')}"  # at the first size
        for (path, d) in students:
            name = f"student {path.name} {d} greedy"
            notes.append(f"{n} thread(s): {name} / teacher beam {args.beam} float32: speed "
                         f"{rate[name] / rate[teacher]:.2f}x (target >= 3), BLEU "
                         f"{bleu[name] - bleu[teacher]:+.2f} (target >= -1.0)")
    print(markdown(["threads", "decoder", "sentences/s", "BLEU"], rows))
    print("\n".join(notes))
    if students:
        sizes = [(args.run, run)] + [(p, load_run(p, "cpu")) for p in
                                     dict.fromkeys(p for p, _ in students)]
        print(markdown(["run", "encoder layers", "decoder layers", "d_model", "parameters",
                        "float32 MB"],
                       [[Path(p).name, r.cfg.model.n_enc_layers, r.cfg.model.n_dec_layers,
                         r.cfg.model.d_model, f"{sum(t.numel() for t in r.model.parameters()):,}",
                         f"{sum(t.numel() for t in r.model.parameters()) * 4 / 1e6:.1f}"]
                        for p, r in sizes]))
    tmp.cleanup()


class Processes:
    """N processes (spawned, as mt translate --workers starts them), each holding one
    Translator per contender of the run, of one torch thread: `translator(key)` translates
    lines in N contiguous parts of about equal characters (`balanced`), one a process, as
    mt translate --workers shares out a long input's chunks (a test set is shorter than one
    chunk, which mt translate gives one process)."""

    def __init__(self, run: str, n: int, cfgs: dict):
        ctx = multiprocessing.get_context("spawn")
        self.n, self.pool = n, ProcessPoolExecutor(n, mp_context=ctx, initializer=_load,
                                                   initargs=(run, cfgs))

    def translator(self, key) -> Callable[[list[str]], list[str]]:
        def translate(lines: list[str]) -> list[str]:
            bounds = balanced(lines, self.n)
            parts = [self.pool.submit(_translate, key, lines[a:z])
                     for a, z in itertools.pairwise(bounds)]
            return [t for part in parts for t in part.result()]
        return translate


def balanced(lines: list[str], parts: int) -> list[int]:
    """Bounds cutting lines into at most `parts` contiguous runs of about equal characters (a
    line's work grows with its length), none empty: run k is lines[b[k]:b[k + 1]]."""
    ends = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))
    cuts = [0]
    for k in range(1, parts):
        aim = ends[-1] * k / parts
        cut = bisect.bisect_left(ends, aim)  # the first end at or past it
        if cut > 0 and aim - ends[cut - 1] < ends[cut] - aim:  # or the one before, nearer
            cut -= 1
        if cuts[-1] < cut < len(lines):
            cuts.append(cut)
    return cuts + [len(lines)]


_translators: dict = {}  # a process's own (Processes)


def _load(run: str, cfgs: dict) -> None:
    torch.set_num_threads(1)
    loaded = load_run(run, "cpu")
    inference_layout(loaded.model)
    _translators.update({key: Translator(loaded, cfg) for key, cfg in cfgs.items()})


def _translate(key, lines: list[str]) -> list[str]:
    return _translators[key].translate(lines)


def fastest(rate: dict[str, float], prefix: str, search: str) -> str:
    """The fastest contender named `prefix`... whose search is `search` (greedy, beam K), at
    any batch size (a name's " @N")."""
    return max((m for m in rate if m.startswith(prefix)
                and m.split(" @")[0].endswith(search)), key=rate.get)


if __name__ == "__main__":
    sys.exit(main())
