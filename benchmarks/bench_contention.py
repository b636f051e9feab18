"""mt beside a busy neighbour: `mt translate` and `mt train`, each idle and beside one busy
process (a plain Python loop, as any other job would be), with the torch threads given
(--threads: 0 is mt's default: decoding streams for translate, threads following the load for
train) and under thread settings given as environment variables.

    python -m benchmarks.bench_contention RUN [--lines 8000] [--steps 300] [--rounds 3] \
        [--threads 0 2] [--env "" "OMP_WAIT_POLICY=PASSIVE" ...]
    python -m benchmarks.bench_contention RUN --smoke     # 50 lines, 3 steps, 1 round, asleep

Each measurement is a whole process, as a user runs it: `mt translate RUN -i FILE -o OUT`
(greedy) on --lines source lines of Multi30k train, and `mt train CONFIG` for --steps steps
(no validation but the last, no BLEU). Every (settings, workload, idle or busy) contender takes
its turn each round and keeps its fastest. "" is the environment as it is; a variable given
(e.g. OMP_WAIT_POLICY=PASSIVE, or GOMP_SPINCOUNT=N: how long OpenMP's threads spin before they
sleep, 300,000 checks by default in libgomp) is added to it.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness import (
    MULTI30K,
    ROOT,
    SMOKE_DATA,
    alternate,
    environment,
    markdown,
    parse,
    parser,
    train_command,
    watched,
)
from mt.textio import iter_lines


def busy(asleep: bool = False) -> subprocess.Popen:
    """One process that keeps one core busy until killed (asleep: one that only waits, for
    --smoke, which checks the harness and must not take a core from the test suite)."""
    loop = "import time; time.sleep(3600)" if asleep else "while True: pass"
    return subprocess.Popen([sys.executable, "-c", loop])


def measure(command: list[str], env: dict[str, str], neighbour: bool, asleep: bool = False
            ) -> float:
    other = busy(asleep) if neighbour else None
    try:
        return watched(command, " ".join(command[2:4]), env)[0]
    finally:
        if other is not None:
            other.kill()
            other.wait()


def main() -> None:
    ap = parser(__doc__, rounds=3,
                smoke="50 lines, 3 steps of the toy config, 1 round, the neighbour asleep")
    ap.add_argument("run", help="a run directory or checkpoint to translate with")
    ap.add_argument("--input", type=Path, default=MULTI30K / "train.de.gz")
    ap.add_argument("--lines", type=int, default=8000)
    ap.add_argument("--config", default=str(ROOT / "configs" / "multi30k_de_en_30min_words.yaml"))
    ap.add_argument("--data", default=None, help="data.dir for training, if not the config's")
    ap.add_argument("--steps", type=int, default=300, help="training steps (0: no training)")
    ap.add_argument("--threads", type=int, nargs="+", default=[0],
                    help="torch threads to compare: mt translate --threads N, train.threads=N "
                    "(0: mt's default)")
    ap.add_argument("--env", nargs="+", default=[""],
                    help='settings to compare, each "VAR=value ..." ("": as it is)')
    args = parse(ap, {"lines": 50, "steps": 3, "rounds": 1, "config": SMOKE_DATA["config"],
                      "data": SMOKE_DATA["data"], "input": ROOT / "data/toy/toy.test.en"})
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "input.txt"
        lines = itertools.islice(itertools.cycle(list(iter_lines(args.input))), args.lines)
        src.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        translate = [sys.executable, "-m", "mt", "translate", args.run, "-i", str(src), "-o",
                     str(Path(tmp) / "out.txt"), "--beam", "1"]
        data = [f"data.dir={args.data}"] if args.data else []

        def contender(setting: tuple[str, int], work: str, neighbour: bool):
            env, threads = setting

            def run(r: int) -> float:
                command = [*translate, "--threads", str(threads)] if work == "translate" else \
                    train_command(args.config, args.steps, [*data, f"train.threads={threads}"],
                                  Path(tempfile.mkdtemp(dir=tmp)) / "run")
                return measure(command, environment(env), neighbour, args.smoke)
            return run

        works = ["translate", *(["train"] if args.steps else [])]
        settings = [(env, threads) for env in args.env for threads in args.threads]
        keys = [(setting, work, neighbour) for setting in settings for work in works
                for neighbour in (False, True)]
        best = alternate({key: contender(*key) for key in keys}, args.rounds)
    print(f"{args.run}: translate {args.lines:,} lines (greedy); train {args.steps} steps of "
          f"{args.config}; fastest of {args.rounds} round(s)\n")
    first = settings[0]
    rows = []
    for setting in settings:
        for work in works:
            idle, loaded = best[setting, work, False], best[setting, work, True]
            rows.append([name(setting), work, f"{idle:.1f}", f"{loaded:.1f}",
                         f"{loaded / idle:.2f}x", f"{idle / best[first, work, False]:.2f}x"])
    print(markdown(["settings", "workload", "idle, s", "busy neighbour, s", "busy / idle",
                    f"idle / first idle ({name(first)})"], rows))


def name(setting: tuple[str, int]) -> str:
    env, threads = setting
    return (f"threads {threads}" if threads else "mt's default") + (
        f", `{env}`" if env else "")


if __name__ == "__main__":
    main()
