"""Training speed with torch's CPU tensors on transparent huge pages (THP_MEM_ALLOC_ENABLE=1,
a torch setting that mt leaves to the environment) and without.

The setting is read once per process, so each measurement is a child process; children with it
off and on take turns for --rounds rounds, and each setting keeps its fastest round. A child
trains mt (fp32 and bf16, as `train.amp: none` and `bf16`) from the same weights on the same
batches of the config's data, and reports target tokens/s and minor page faults per step.

    python scripts/bench_hugepages.py --data ../shared/data/multi30k --steps 10 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_train import add_data_args, base_trainer, mt_trainer  # noqa: E402


def child(args: argparse.Namespace) -> None:
    cfg, base, tmp = base_trainer(args.config, args.data, args.threads)
    batches = base.train_data.batches(cfg.train.max_tokens, seed=cfg.train.seed)
    warm, timed = batches[:3], batches[3:3 + args.steps]
    out = {}
    for amp in args.amp:
        t = mt_trainer(base, amp, False, tmp / amp)
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_args(ap)
    ap.add_argument("--steps", type=int, default=10, help="timed steps per child")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--amp", nargs="+", default=["none", "bf16"])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    best: dict[tuple[str, str], dict] = {}
    for r in range(args.rounds):
        for thp in ("0", "1"):
            cmd = [sys.executable, __file__, "--child", "--config", args.config, "--data",
                   args.data, "--steps", str(args.steps), "--threads", str(args.threads),
                   "--amp", *args.amp]
            done = subprocess.run(cmd, env={**os.environ, "THP_MEM_ALLOC_ENABLE": thp},
                                  capture_output=True, text=True, check=True)
            for amp, m in json.loads(done.stdout.strip().splitlines()[-1]).items():
                print(f"round {r + 1} huge pages {'on' if thp == '1' else 'off'} {amp}: "
                      f"{m['tok_s']:.0f} tok/s, {m['faults_per_step']:.0f} faults/step",
                      file=sys.stderr)
                if m["tok_s"] > best.get((thp, amp), {"tok_s": 0})["tok_s"]:
                    best[(thp, amp)] = m
    print(f"\n{args.config}: {args.steps} steps per child, {args.rounds} rounds, fastest kept; "
          f"{args.threads} thread(s)\n")
    print("| amp | tok/s, off | tok/s, on | on / off | page faults a step, off | on |")
    print("|---|---|---|---|---|---|")
    for amp in args.amp:
        off, on = best[("0", amp)], best[("1", amp)]
        print(f"| {amp} | {off['tok_s']:.0f} | {on['tok_s']:.0f} | "
              f"{on['tok_s'] / off['tok_s']:.2f}x | {off['faults_per_step']:,.0f} | "
              f"{on['faults_per_step']:,.0f} |")


if __name__ == "__main__":
    main()
