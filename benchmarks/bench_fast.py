"""Each lever of fast decoding alone, side by side: today's eager step (the cache that grows
each step), the static cache (mt.static_cache), and the static cache compiled (decode.compile
on); sentences/s and BLEU, greedy and beam, at each thread count. The features that run on
the eager step are levers too, for what each costs over it: `confidence` (decode.confidence,
its trace recorded by the search), `align` (decode.align) and `glossary` (hard constraints
with GLOSSARY, five common de -> en terms; beam search only).

    python -m benchmarks.bench_fast RUN [--src FILE --ref FILE] [--limit N] [--beam 5]
        [--threads 1,2] [--rounds 3] [--levers eager,static,compiled]
        [--dtype bf16] [--levers eager,confidence,align,glossary]
    python -m benchmarks.bench_fast RUN --smoke   # 4 toy sentences, 1 round, no Inductor

Defaults to Multi30k test_2016_flickr (1000 sentences, de -> en). The levers take turns,
--rounds rounds of all of them, each keeping its fastest (benchmarks.harness.alternate); every
lever translates a few sentences first, untimed, and the compiled one all of them once, so that
its compilation (reported apart, with the graphs compiled) is not in its time. A lever is a
name and a function that sets it up (LEVERS): int8 (decode.dtype) and the lexical shortlist
add theirs there when they exist, and combinations are levers too. --smoke lowers each
compiled graph by running it as it is (no Inductor: minutes on a small machine), which checks
the plumbing, not the speed. Run by hand on an otherwise idle machine, not a test.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable, Iterator

import torch

from benchmarks.bench_decode import add_test_set_args, read_test_set
from benchmarks.harness import TOY, alternate, cpu_model, markdown, parse, parser
from mt.checkpoint import load_run
from mt.config import override
from mt.decoding import compiled, packed, step
from mt.decoding.precision import inference_layout
from mt.metrics import score
from mt.translator import Translator

WARMUP = 8  # sentences translated untimed before each measurement


@contextlib.contextmanager
def eager_step(static: bool) -> Iterator[dict]:
    """An eager step, with the cache that grows each step (mt's) or the static one
    (mt.decoding.step.STATIC)."""
    before, step.STATIC = step.STATIC, static
    try:
        yield {"compile": "off"}
    finally:
        step.STATIC = before


@contextlib.contextmanager
def compiled_step() -> Iterator[dict]:
    yield {"compile": "on"}


@contextlib.contextmanager
def unpacked() -> Iterator[dict]:
    """A bf16 model's Linear layers as torch's own, weights not packed (mt.decoding.packed)."""
    before, packed.PACK = packed.PACK, False
    try:
        yield {"compile": "off"}
    finally:
        packed.PACK = before


# the glossary lever's terms: words of most Multi30k lines, as the model translates them, so
# that the constraints are met where the search would go anyway (their cost, not a detour)
GLOSSARY = [("Mann", "man"), ("Frau", "woman"), ("Hund", "dog"), ("Straße", "street"),
            ("Kinder", "children")]


@contextlib.contextmanager
def feature(**fields) -> Iterator[dict]:
    """The eager step with a feature on: DecodeConfig fields, or a glossary."""
    yield {"compile": "off", **fields}


# name -> a context that sets the lever up and yields the DecodeConfig fields it changes (and
# "glossary": the terms every translation keeps)
LEVERS: dict[str, Callable[[], contextlib.AbstractContextManager[dict]]] = {
    "eager": lambda: eager_step(False), "static": lambda: eager_step(True),
    "compiled": compiled_step, "unpacked": unpacked,
    "confidence": lambda: feature(confidence=True), "align": lambda: feature(align=True),
    "glossary": lambda: feature(glossary=GLOSSARY)}


def contender(translator: Translator, lever, lines: list[str], glossary: list | None = None
              ) -> Callable[[int], tuple]:
    """One lever's run: its translations of lines, through the path `mt translate` takes (so
    that alignments and confidence are computed), and their time."""
    def translate(chunk: list[str]) -> list[str]:
        return [best[0].text for best in
                translator.translate_nbest_stream(chunk, False, glossary=glossary)]

    def run(r: int) -> tuple[list[str], float]:
        with lever():
            translate(lines[:WARMUP])
            start = time.perf_counter()
            out = translate(lines)
            return out, time.perf_counter() - start
    return run


def warm(translators: dict, lines: list[str]) -> None:
    """Each compiled lever translates every line once, so that each shape it meets is compiled
    before it is timed; the compilation's time and graphs printed."""
    for (name, kind), (tr, lever, _) in translators.items():
        if name != "compiled":
            continue
        before, start = compiled.STATS.compiles, time.perf_counter()
        with lever():
            tr.translate(lines)
        print(f"compiled {kind}: {compiled.STATS.compiles - before} graph(s) compiled in "
              f"{time.perf_counter() - start:.1f} s (first pass, untimed)", flush=True)


def main() -> None:
    p = parser(__doc__, rounds=3, smoke="the first 4 toy test sentences (en -> de), beam 2, "
               "1 round, compiled graphs run uncompiled")
    add_test_set_args(p)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--threads", default="1,2", help="comma-separated CPU thread counts")
    p.add_argument("--dtype", default="float32", help="decode.dtype of every lever "
                   "(unpacked: bf16 only)")
    p.add_argument("--levers", default="eager,static,compiled",
                   help=f"comma-separated, of {', '.join(LEVERS)}")
    args = parse(p, {"src": TOY / "toy.test.en", "ref": TOY / "toy.test.de", "limit": 4,
                     "beam": 2, "rounds": 1, "threads": "1"})
    if args.smoke:
        compiled.lower = lambda gm, example_inputs: gm.forward
    run = load_run(args.run, torch.device("cpu"))
    inference_layout(run.model)  # as Translator.load lays out what mt translate decodes with
    src, ref = read_test_set(args)
    levers = [name for name in args.levers.split(",") if name]
    kinds = {"greedy": ["decode.beam=1"], f"beam {args.beam}": [f"decode.beam={args.beam}"]}
    translators = {}
    for name in levers:
        with LEVERS[name]() as fields:
            glossary = fields.pop("glossary", None)
            for kind, items in kinds.items():
                if glossary is not None and kind == "greedy":
                    continue  # a glossary's terms are kept by beam search
                cfg = override(run.cfg, ["decode.nbest=1", *items], "bench").decode
                tr = Translator(run, dataclasses.replace(cfg, dtype=args.dtype, **fields),
                                torch.device("cpu"))
                translators[(name, kind)] = (tr, LEVERS[name], glossary)
    print(f"checkpoint {args.run} (step {run.step}); {len(src)} sentences from {args.src}; "
          f"{args.dtype}; fastest of {args.rounds} rounds; {cpu_model()}")
    for n in [int(t) for t in args.threads.split(",") if t]:
        torch.set_num_threads(n)
        warm(translators, src)
        results = alternate({key: contender(tr, lever, src, glossary)
                             for key, (tr, lever, glossary) in translators.items()}, args.rounds)
        report(results, ref, n, levers, list(kinds))


def report(results: dict, ref: list[str], threads: int, levers: list[str], kinds: list[str]
           ) -> None:
    """The table for one thread count: sentences/s, against eager, and BLEU."""
    print(f"\n{threads} thread(s)")
    rows = []
    for kind in kinds:
        for name in levers:
            if (name, kind) not in results:
                continue
            out, secs = results[(name, kind)]
            rate = len(out) / secs
            base = results.get(("eager", kind))
            speedup = f"{rate / (len(base[0]) / base[1]):.2f}x" if base else "-"
            rows.append([kind, name, f"{rate:.1f}", speedup, f"{score(out, ref)['bleu']:.2f}"])
    print(markdown(["search", "lever", "sentences/s", "/ eager", "BLEU"], rows))


if __name__ == "__main__":
    sys.exit(main())
