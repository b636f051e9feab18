"""Training speed with torch's CPU tensors on transparent huge pages (THP_MEM_ALLOC_ENABLE=1,
a torch setting that mt leaves to the environment) and without.

The setting is read once per process, so each measurement is a child process; children with it
off and on take turns for --rounds rounds, and each setting keeps its fastest round. A child
trains mt (fp32 and bf16, as `train.amp: none` and `bf16`) from the same weights on the same
batches of the config's data, and reports target tokens/s and minor page faults per step.

    python -m benchmarks.bench_hugepages --data ../shared/data/multi30k --steps 10 --rounds 3
    python -m benchmarks.bench_hugepages --smoke     # seconds, on the toy corpus
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from benchmarks.harness import (
    ROOT,
    SMOKE_DATA,
    add_data_args,
    alternate,
    markdown,
    parse,
    parser,
    trainers,
)


def child(args: argparse.Namespace) -> None:
    base, contender = trainers(args)
    cfg = base.cfg
    batches = base.train_data.batches(cfg.train.max_tokens, seed=cfg.train.seed)
    warm, timed = batches[:3], batches[3:3 + args.steps]
    out = {}
    for amp in args.amp:
        t = contender(amp, amp=amp)
        for b in warm:
            t.step(b)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        clock = time.perf_counter()
        for b in timed:
            t.step(b)
        seconds = time.perf_counter() - clock
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        out[amp] = {"tok_s": sum(b.n_tgt_tokens for b in timed) / seconds,
                    "faults_per_step": faults / len(timed)}
    print(json.dumps(out))


def main() -> None:
    ap = parser(__doc__, rounds=3, smoke="the toy corpus, 2 steps, fp32 only, 1 round")
    add_data_args(ap)
    ap.add_argument("--steps", type=int, default=10, help="timed steps per child")
    ap.add_argument("--amp", nargs="+", default=["none", "bf16"])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parse(ap, {**SMOKE_DATA, "steps": 2, "rounds": 1, "amp": ["none"]})
    if args.child:
        return child(args)

    def measure(thp: str):
        """Round r: one child with huge pages off ("0") or on ("1"); per amp its measures."""
        def run(r: int) -> dict[str, dict]:
            cmd = [sys.executable, "-m", "benchmarks.bench_hugepages", "--child", "--config",
                   args.config, "--data", args.data, "--steps", str(args.steps), "--threads",
                   str(args.threads), "--amp", *args.amp]
            done = subprocess.run(cmd, env={**os.environ, "THP_MEM_ALLOC_ENABLE": thp}, cwd=ROOT,
                                  capture_output=True, text=True, check=True)
            measured = json.loads(done.stdout.strip().splitlines()[-1])
            for amp, m in measured.items():
                print(f"round {r + 1} huge pages {'on' if thp == '1' else 'off'} {amp}: "
                      f"{m['tok_s']:.0f} tok/s, {m['faults_per_step']:.0f} faults/step",
                      file=sys.stderr)
            return measured
        return run

    def faster(a: dict[str, dict], b: dict[str, dict]) -> dict[str, dict]:
        return {amp: max(a[amp], b[amp], key=lambda m: m["tok_s"]) for amp in a}

    best = alternate({"0": measure("0"), "1": measure("1")}, args.rounds, keep=faster)
    print(f"\n{args.config}: {args.steps} steps per child, {args.rounds} rounds, fastest kept; "
          f"{args.threads} thread(s)\n")
    rows = []
    for amp in args.amp:
        off, on = best["0"][amp], best["1"][amp]
        rows.append([amp, f"{off['tok_s']:.0f}", f"{on['tok_s']:.0f}",
                     f"{on['tok_s'] / off['tok_s']:.2f}x", f"{off['faults_per_step']:,.0f}",
                     f"{on['faults_per_step']:,.0f}"])
    print(markdown(["amp", "tok/s, off", "tok/s, on", "on / off", "page faults a step, off",
                    "on"], rows))


if __name__ == "__main__":
    main()
