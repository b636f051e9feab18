"""A translation memory of many pairs: build time, file size, lookup latency, peak memory, and
how often the lookup finds the best match an exhaustive scan finds.

    python -m benchmarks.bench_memory [--pairs 1000000] [--queries 1000] [--recall 10]
    python -m benchmarks.bench_memory --smoke     # the toy corpus, 3,000 pairs

The memory (SQLite, mt.memory) holds --pairs de-en pairs: the training split of --data
(Multi30k by default) repeated, each copy after the first with one word of its source replaced
by a random word of the corpus and its copy number appended (so no two are duplicates and many
are close matches). The queries are the test split's sources (test_2016_flickr: sentences the
memory does not hold, as a translator's new text). Measured in this one process, on one core
(SQLite and the scoring are single-threaded): the build (`Memory.add`, a transaction per 1,000
pairs), the file's size, each query's `search(k=5)` in milliseconds (p50, p99, mean), peak
resident memory (the process's maximum RSS), and recall@1 on the first --recall queries: the
share whose first match scores what the best of every pair in the memory scores (an exhaustive
scan of mt.memory.match.score: slow, about 40 s a query at 1,000,000 pairs).

--run RUN (a de->en run) also times translating the queries with the memory (`decode.memory`:
each line looked up, exact matches reused) against without it, one thread, the two taking
turns for --rounds rounds, fastest of each: what a memory costs a translation (the issue's
target: at most 1.2x).
"""

from __future__ import annotations

import random
import resource
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.harness import MULTI30K, TOY, alternate, markdown, parse, parser, timer
from mt.memory.match import score
from mt.memory.sqlite import SqliteMemory
from mt.textio import read_lines, split_path


def corpus(data: Path, split: str, langs: tuple[str, str]) -> list[tuple[str, str]]:
    return list(zip(*(read_lines(split_path(data, split, lang)) for lang in langs)))


def varied(pairs: list[tuple[str, str]], n: int, seed: int = 0):
    """n pairs: pairs, then copies with one source word replaced and the copy's number added."""
    rng = random.Random(seed)
    vocabulary = sorted({w for s, _ in pairs for w in s.split()})
    for i in range(n):
        source, target = pairs[i % len(pairs)]
        if i >= len(pairs):
            words = source.split() or [""]
            words[rng.randrange(len(words))] = rng.choice(vocabulary)
            source = " ".join([*words, str(i // len(pairs))])
        yield source, target


def main() -> None:
    ap = parser(__doc__, rounds=1, smoke="the toy corpus, 3,000 pairs, 100 queries")
    ap.add_argument("--pairs", type=int, default=1_000_000, help="pairs (default 1,000,000)")
    ap.add_argument("--queries", type=int, default=1000, help="lookups timed (default 1,000)")
    ap.add_argument("--recall", type=int, default=10, help="queries checked against an "
                    "exhaustive scan (default 10)")
    ap.add_argument("--data", type=Path, default=MULTI30K)
    ap.add_argument("--train", default="train")
    ap.add_argument("--test", default="test_2016_flickr")
    ap.add_argument("--dir", default=None, help="where the memory is written (default: TMP)")
    ap.add_argument("--run", type=Path, default=None, help="also time translating the "
                    "queries with the memory against without it (a de->en run)")
    args = parse(ap, {"data": TOY, "train": "toy.train", "test": "toy.test", "pairs": 3000,
                      "queries": 100, "recall": 20})
    langs = ("de", "en")
    train = corpus(args.data, args.train, langs)
    queries = [s for s, _ in corpus(args.data, args.test, langs)][:args.queries]
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench_memory.") as tmp:
        path = Path(tmp) / "memory.db"
        with SqliteMemory(path, langs) as memory:
            start = time.perf_counter()
            added, _ = memory.add(varied(train, args.pairs))
            build = time.perf_counter() - start
            size = memory.info()["bytes"]
            times, found = [], []
            for q in queries:
                start = time.perf_counter()
                found.append(memory.search(q, k=5))
                times.append((time.perf_counter() - start) * 1000)
            checked = queries[:args.recall]
            best = [max(score(q, s) for s, _ in varied(train, args.pairs)) for q in checked]
        if args.run:
            cost = translation_cost(args.run, path, queries, args.rounds)
    hits = sum(bool(f) and abs(f[0].score - b) < 1e-9 for f, b in zip(found, best))
    times.sort()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(markdown(["pairs", "build, s", "pairs/s", "file, MiB", "lookup p50, ms",
                    "p99, ms", "mean, ms", "peak RSS, MiB", "recall@1"],
                   [[f"{added:,}", f"{build:.1f}", f"{added / build:,.0f}",
                     f"{size / 2**20:,.1f}", f"{times[len(times) // 2]:.2f}",
                     f"{times[min(len(times) - 1, int(len(times) * 0.99))]:.2f}",
                     f"{statistics.fmean(times):.2f}", f"{peak:,.0f}",
                     f"{hits}/{len(checked)}"]]))
    if args.run:
        print(f"\ntranslating {len(queries):,} lines with the memory / without it, one thread, "
              f"fastest of {args.rounds} round(s): {cost:.2f}x (target <= 1.2x)")


def translation_cost(run: Path, memory: Path, lines: list[str], rounds: int) -> float:
    """Seconds translating lines with the memory over seconds without it."""
    import torch

    from mt.translator import Translator

    torch.set_num_threads(1)
    plain = Translator.load(run)
    with_memory = plain.with_options(memory=str(memory))
    with_memory.translate(lines[:8])  # opens the memory, untimed
    best = alternate({"without": timer(lambda: plain.translate(lines)),
                      "with": timer(lambda: with_memory.translate(lines))}, rounds)
    return best["with"] / best["without"]


if __name__ == "__main__":
    main()
