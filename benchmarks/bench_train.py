"""Training speed, side by side in one process: a naive loop, mt in fp32, mt with bf16 autocast,
and mt compiled, on the same config and data (default: Multi30k).

Each contender trains --steps steps per round; the contenders take turns for --rounds rounds and
each keeps its fastest round (on a shared machine noise only adds time). Rounds continue the same
training, so after the last round every mt contender has trained the same batches for the same
number of steps; their validation losses are then compared (bf16 against fp32).

Printed per contender: target tokens/s, padding fraction (of source + target positions), and
model FLOPs/s as a share of the fp32 matrix-product peak that the script measures itself on the
model's own shapes (and, for bf16, of the bf16 peak). A step counts 3x the forward FLOPs of the
real (non-pad) tokens.

    python -m benchmarks.bench_train --data ../shared/data/multi30k --steps 20 --rounds 2
    python -m benchmarks.bench_train --smoke     # seconds, on the toy corpus: does it still run?
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

import mt.kernels
from benchmarks.harness import (
    SMOKE_DATA,
    add_data_args,
    alternate,
    forward_flops,
    markdown,
    parse,
    parser,
    trainers,
)
from mt.config import Config
from mt.data import Batch
from mt.model import make_model
from mt.train.loop import Trainer
from mt.vocab import PAD


def matmul_peak(cfg: Config, rows: int, vocab: int, dtype: torch.dtype) -> float:
    """Best FLOP/s of forward and backward-shaped products on the model's weight shapes."""
    D, F_ = cfg.model.d_model, cfg.model.d_ff
    best = 0.0
    for k, n in ((D, D), (D, 2 * D), (D, F_), (F_, D), (D, vocab)):
        x, w = torch.randn(rows, k, dtype=dtype), torch.randn(n, k, dtype=dtype)
        for _ in range(2):
            x @ w.t()
        reps, clock = 0, time.perf_counter()
        while time.perf_counter() - clock < 0.3:
            x @ w.t()
            reps += 1
        best = max(best, 2 * rows * k * n * reps / (time.perf_counter() - clock))
    return best


@contextlib.contextmanager
def naive_attention():
    """Attention written out: matmul, masked_fill with -inf, softmax, matmul (no fused kernel),
    and torch's own dropout (not mt's cheaper CPU mask), as the seed code had."""
    pick, cheap = mt.kernels.fused_is_faster, mt.kernels.dropout
    mt.kernels.fused_is_faster = lambda q, p: False  # always the written-out form
    mt.kernels.dropout = lambda x, p, training=True: F.dropout(x, p, training)
    try:
        yield
    finally:
        mt.kernels.fused_is_faster, mt.kernels.dropout = pick, cheap


class Naive:
    """The textbook loop: random-order batches of a fixed number of sentences padded to the
    longest, written-out attention, the mean loss read (.item()) every step."""

    def __init__(self, base: Trainer, sentences: int, seed: int):
        self.cfg = base.cfg
        data = base.train_data
        order = list(range(len(data)))
        random.Random(seed).shuffle(order)
        self.batches = []
        for i in range(0, len(order) - sentences + 1, sentences):
            # padded to the longest of the batch
            self.batches.append(data.collate(np.array(order[i:i + sentences])))
        torch.manual_seed(self.cfg.train.seed)
        self.model = make_model(self.cfg.model, len(base.src_vocab), len(base.tgt_vocab))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.cfg.train.lr,
                                          betas=(0.9, 0.98), eps=1e-9)
        self.model.train()

    def step(self, batch: Batch) -> float:
        with naive_attention():
            logits = self.model(batch.src, batch.tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch.tgt_out.reshape(-1),
                               ignore_index=PAD, label_smoothing=self.cfg.train.label_smoothing)
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.train.clip_norm)
        self.optimizer.step()
        return loss.item()


@dataclass
class Contender:
    name: str
    step: Callable[[Batch], object]
    batches: list[Batch]
    trainer: Trainer | None = None


def padding(batches: list[Batch]) -> float:
    total = sum(b.src.numel() + b.tgt_out.numel() for b in batches)
    real = sum(int((b.src != PAD).sum() + (b.tgt_out != PAD).sum()) for b in batches)
    return 1 - real / total


def main() -> None:
    ap = parser(__doc__, rounds=2, smoke="the toy corpus, 2 steps, 1 round, not compiled")
    add_data_args(ap)
    ap.add_argument("--steps", type=int, default=20, help="steps per contender per round")
    ap.add_argument("--skip", nargs="*", default=[], help="contenders to leave out, e.g. compiled")
    args = parse(ap, {**SMOKE_DATA, "steps": 2, "rounds": 1, "skip": ["compiled"]})
    base, contender = trainers(args)
    cfg = base.cfg
    vocab = len(base.tgt_vocab)
    n = args.steps * args.rounds
    batches = base.train_data.batches(cfg.train.max_tokens, seed=cfg.train.seed)[:n + 1]
    per_batch = sum(b.src.size(0) for b in batches) / len(batches)

    naive = Naive(base, round(per_batch), cfg.train.seed)
    contenders = [Contender("naive", naive.step, naive.batches[:n + 1])]
    for name, amp, compiled in (("mt fp32", "none", False), ("mt bf16", "bf16", False),
                                ("mt compiled", "none", True)):
        if name.split()[-1] not in args.skip:
            t = contender(name.replace(" ", "_"), amp=amp, compile=compiled)
            contenders.append(Contender(name, t.step, batches, t))
    for c in contenders:  # warm-up (and compilation) outside the timing, on a batch not timed
        clock = time.perf_counter()
        float(c.step(c.batches[-1]))
        print(f"{c.name}: first step {time.perf_counter() - clock:.1f} s", file=sys.stderr)

    def trains(c: Contender) -> Callable[[int], float]:
        """Round r: the contender's r-th chunk of batches; its target tokens/s."""
        def run(r: int) -> float:
            chunk = c.batches[r * args.steps:(r + 1) * args.steps]
            clock = time.perf_counter()
            for b in chunk:
                c.step(b)
            if c.trainer is not None:
                c.trainer.stats.tolist()  # wait for the device (a no-op on CPU)
            rate = sum(b.n_tgt_tokens for b in chunk) / (time.perf_counter() - clock)
            print(f"round {r + 1} {c.name}: {rate:.0f} tok/s", file=sys.stderr)
            return rate
        return run

    best = alternate({c.name: trains(c) for c in contenders}, args.rounds, keep=max)
    rows = sum(b.src.numel() + b.tgt_in.numel() for b in batches) // (2 * len(batches))
    peak32 = matmul_peak(cfg, rows, vocab, torch.float32)
    peak16 = matmul_peak(cfg, rows, vocab, torch.bfloat16)
    print(f"\n{cfg.data.dir}: {len(base.train_data)} pairs; {args.steps} steps x {args.rounds} "
          f"rounds per contender, fastest round kept; {args.threads} thread(s); "
          f"matmul peak fp32 {peak32 / 1e9:.1f} GFLOP/s, bf16 {peak16 / 1e9:.1f} GFLOP/s\n")
    table, val = [], {}
    for c in contenders:
        used = c.batches[:n]
        per_token = sum(3 * forward_flops(cfg, b, vocab) for b in used) / sum(
            b.n_tgt_tokens for b in used)
        flops = best[c.name] * per_token
        if c.trainer is not None:  # the weights' quality, so evaluated in fp32 for all
            c.trainer.amp = None
            val[c.name] = c.trainer.validate()["val_loss"]
        share16 = f"{flops / peak16:.0%}" if c.name == "mt bf16" else ""
        table.append([c.name, f"{best[c.name]:.0f}", f"{padding(used):.1%}",
                      f"{per_token / 1e6:.1f}", f"{flops / peak32:.0%}", share16,
                      val.get(c.name, "")])
    print(markdown(["contender", "tok/s", "padding", "MFLOP/token", "share of fp32 peak",
                    "share of bf16 peak", "val loss"], table))
    fp32 = best.get("mt fp32")
    ratios = [["mt fp32 / naive, tok/s", f"{fp32 / best['naive']:.2f}x", ">= 3x"]]
    if "mt bf16" in best:
        diff = val["mt bf16"] / val["mt fp32"] - 1
        ratios += [["mt bf16 / mt fp32, tok/s", f"{best['mt bf16'] / fp32:.2f}x", ">= 1.6x"],
                   [f"mt bf16 vs fp32, val loss after {n} steps", f"{diff:+.2%}", "within 1%"]]
    if "mt compiled" in best:
        ratios.append(["mt compiled / mt fp32, tok/s", f"{best['mt compiled'] / fp32:.2f}x", ""])
    print("\n" + markdown(["ratio", "measured", "target"], ratios))


if __name__ == "__main__":
    main()
