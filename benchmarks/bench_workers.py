"""`mt translate --workers N` against one worker: lines/s and peak memory on a big file.

    python -m benchmarks.bench_workers RUN [--lines 100000] [--workers 1,2] [--threads T]
    python -m benchmarks.bench_workers RUN --smoke      # 200 lines, 1 round

The input is the source side of a corpus (default Multi30k train, German), repeated to --lines
lines. Each contender is a whole `mt translate RUN -i FILE -o OUT --workers N` process, as a user
runs it (model loads included); they take turns, --rounds rounds, each keeping its fastest. Peak
memory is the largest sum of resident memory over the process and its children, sampled every
50 ms. Every contender's output must be byte-identical to the first's.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import ROOT, add_run_args, alternate, markdown, parse, parser, watched
from mt.textio import iter_lines


def translate(run: str, src: Path, out: Path, workers: int, threads: int, beam: int
              ) -> tuple[float, int]:
    """Seconds and peak resident bytes of one `mt translate --workers N --threads T`."""
    return watched([sys.executable, "-m", "mt", "translate", run, "-i", str(src), "-o", str(out),
                    "--workers", str(workers), "--threads", str(threads),
                    *(["--beam", str(beam)] if beam else [])], f"mt translate --workers {workers}")


def main() -> None:
    ap = parser(__doc__, rounds=2, smoke="200 lines, 1 round")
    add_run_args(ap, "train.de.gz")
    ap.add_argument("--lines", type=int, default=100_000, help="lines (default 100,000)")
    ap.add_argument("--workers", default="1,2", help="worker counts (default 1,2)")
    ap.add_argument("--beam", type=int, default=0, help="--beam (default 0: the run's config)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads of each worker (default 0: the cores shared out)")
    args = parse(ap, {"lines": 200, "rounds": 1, "input": ROOT / "data/toy/toy.test.en"})
    counts = [int(w) for w in args.workers.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "input.txt"
        lines = itertools.islice(itertools.cycle(list(iter_lines(args.input))), args.lines)
        src.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        outs = {w: Path(tmp) / f"out.{w}.txt" for w in counts}
        best = alternate({w: (lambda r, w=w: translate(args.run, src, outs[w], w, args.threads,
                                                      args.beam))
                          for w in counts}, args.rounds,
                         keep=lambda a, b: (min(a[0], b[0]), max(a[1], b[1])))
        texts = {w: outs[w].read_bytes() for w in counts}
    same = all(t == texts[counts[0]] for t in texts.values())
    print(f"{args.run}: {args.lines:,} lines of {args.input}; fastest of {args.rounds} "
          f"round(s); {len(os.sched_getaffinity(0))} cores; --threads {args.threads}; "
          f"--beam {args.beam or 'as configured'}\n")
    print(markdown(["workers", "seconds", "lines/s", "peak RSS, MiB"],
                   ([w, f"{s:.1f}", f"{args.lines / s:.0f}", f"{m / 2**20:.0f}"]
                    for w, (s, m) in best.items())))
    first = counts[0]
    for w in counts[1:]:
        print(f"\n--workers {w} / --workers {first} speed: {best[first][0] / best[w][0]:.2f}x")
    print(f"outputs byte-identical: {'yes' if same else 'NO'}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
