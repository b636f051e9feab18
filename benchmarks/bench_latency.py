"""What one line costs (issue 60's interactive row), in each decoding mode side by side:

- cold: `mt translate RUN OPTIONS` with one line on its standard input, a new process each
  time (start, load, translate, write): the process's wall time;
- warm: in this process, one Translator per mode translating one line at a time: its first
  call (the first line after loading) apart, then the median and 90th percentile of the next
  --lines lines;
- serve: `mt serve RUN OPTIONS --port 0`, its first POST /translate of one line once it
  listens, then the median of the next --lines requests (one line each, one client).

    python -m benchmarks.bench_latency RUN [--lines 50] [--rounds 3] [--threads 1]
        [--modes float32,bf16,auto,compile-auto] [--no-serve]
    python -m benchmarks.bench_latency RUN --smoke     # the toy test set, 3 lines, 1 round

The modes are MODES' options; each contender takes its turn in every round and keeps its
fastest (the cold and serve rows: their fastest round; the warm row: the round of the lowest
median). Lines are the test set's, in order. Run by hand on an idle machine.
"""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch

from benchmarks.bench_decode import add_test_set_args, read_test_set
from benchmarks.bench_serve import Client, Served
from benchmarks.harness import TOY, alternate, cpu_model, markdown, parse, parser
from mt.translator import Translator

# mode -> the command-line options of `mt translate` and `mt serve` that set it
MODES = {"float32": [], "bf16": ["--dtype", "bf16"], "auto": ["--dtype", "auto"],
         "compile-auto": ["--compile", "auto"]}


def cold(run: str, options: list[str], line: str, threads: int) -> Callable[[int], float]:
    """A contender: one `mt translate` process translating `line`, its wall time."""
    command = [sys.executable, "-m", "mt", "translate", run, "--threads", str(threads), *options]

    def once(r: int) -> float:
        start = time.perf_counter()
        subprocess.run(command, input=line + "\n", text=True, check=True, capture_output=True)
        return time.perf_counter() - start
    return once


def one_at_a_time(translate: Callable[[list[str]], object], lines: list[str]) -> list[float]:
    """Each line translated alone, in order: the seconds of each call."""
    times = []
    for line in lines:
        start = time.perf_counter()
        translate([line])
        times.append(time.perf_counter() - start)
    return times


def warm(run: str, options: list[str], lines: list[str], threads: int
         ) -> Callable[[int], tuple[float, float, float]]:
    """A contender: a Translator loaded as `mt translate` loads it, in this process, then
    lines translated one at a time: (first call, median, 90th percentile) in seconds. Each
    round loads it afresh, so that its first call is a first call."""
    decode = dict(zip(options[::2], options[1::2], strict=True))
    fields = {key.removeprefix("--"): value for key, value in decode.items()}

    def once(r: int) -> tuple[float, float, float]:
        torch.set_num_threads(threads)
        translator = Translator.load(run, "cpu", threads=threads, **fields)
        times = one_at_a_time(translator.translate, lines)
        rest = sorted(times[1:])
        return times[0], statistics.median(rest), rest[math.ceil(0.9 * len(rest)) - 1]
    return once


def served(run: str, options: list[str], lines: list[str], threads: int
           ) -> Callable[[int], tuple[float, float]]:
    """A contender: `mt serve` started, then (its first one-line request, the median of the
    next) in seconds."""
    def once(r: int) -> tuple[float, float]:
        with Served(run, "--threads", str(threads), *options) as server:
            client = Client(server.url)
            times = one_at_a_time(client.translate, lines)
            client.close()
            server.stop()
        return times[0], statistics.median(times[1:])
    return once


def main() -> None:
    p = parser(__doc__, rounds=3, smoke="3 toy test lines (en -> de), 1 round")
    add_test_set_args(p)
    p.add_argument("--lines", type=int, default=50, help="one-line calls timed after the first")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES)}")
    p.add_argument("--no-serve", action="store_true", help="leave mt serve out")
    args = parse(p, {"src": TOY / "toy.test.en", "ref": TOY / "toy.test.de", "limit": 0,
                     "lines": 2, "rounds": 1})
    src, _ = read_test_set(args)
    lines = src[: args.lines + 1]
    run, modes = str(args.run), [m for m in args.modes.split(",") if m]
    print(f"checkpoint {run}; {len(lines)} lines from {args.src}, one at a time; "
          f"{args.threads} thread(s); fastest of {args.rounds} rounds; {cpu_model()}",
          flush=True)
    contenders: dict[str, Callable] = {}
    for mode in modes:
        contenders[f"cold {mode}"] = cold(run, MODES[mode], lines[0], args.threads)
        contenders[f"warm {mode}"] = warm(run, MODES[mode], lines, args.threads)
        if not args.no_serve:
            contenders[f"serve {mode}"] = served(run, MODES[mode], lines, args.threads)

    def keep(a, b):  # the fastest round: of a tuple, by its median
        return min(a, b, key=lambda t: t[1] if isinstance(t, tuple) else t)

    best = alternate(contenders, args.rounds, keep=keep)
    ms = lambda s: f"{1000 * s:.1f}"  # noqa: E731
    rows = []
    for mode in modes:
        first, median, p90 = best[f"warm {mode}"]
        serve = best.get(f"serve {mode}")
        rows.append([mode, ms(best[f"cold {mode}"]), ms(first), ms(median), ms(p90),
                     ms(serve[0]) if serve else "-", ms(serve[1]) if serve else "-"])
    print(markdown(["mode", "mt translate, one line (ms, whole process)",
                    "first call after loading (ms)", "next calls, median (ms)", "p90 (ms)",
                    "mt serve, first request (ms)", "next requests, median (ms)"], rows))


if __name__ == "__main__":
    sys.exit(main())
