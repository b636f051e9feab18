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

    python scripts/bench_train.py --data ../shared/data/multi30k --steps 20 --rounds 2
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import mt.model  # noqa: E402
from mt.config import Config, load_config  # noqa: E402
from mt.data import Batch, pad  # noqa: E402
from mt.train.loop import Trainer  # noqa: E402
from mt.vocab import BOS, EOS, PAD  # noqa: E402


def forward_flops(cfg: Config, batch: Batch, vocab: int) -> float:
    """Forward FLOPs of the real tokens of a batch (2 per multiply-add)."""
    m = cfg.model
    D, F_, Le, Ld = m.d_model, m.d_ff, m.n_enc_layers, m.n_dec_layers
    total = 0.0
    for s_row, t_row in zip(batch.src, batch.tgt_out):
        S, T = int((s_row != PAD).sum()), int((t_row != PAD).sum())
        enc = S * (8 * D * D + 4 * D * F_) + 4 * S * S * D  # projections, ffn; QK^T and AV
        dec = T * (8 * D * D + 4 * D * D + 4 * D * F_)  # self q/k/v/o, cross q/o, ffn
        dec += S * 4 * D * D + 4 * T * T * D + 4 * T * S * D  # cross k/v; self and cross attn
        total += Le * enc + Ld * dec + 2 * T * D * vocab
    return total


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
    fused, cheap = mt.model.attention, mt.model.dropout

    def written_out(q, k, v, mask, is_causal=False, p=0.0, need_weights=False):
        return fused(q, k, v, mask, is_causal, p, need_weights=True)[0], None

    mt.model.attention = written_out
    mt.model.dropout = lambda x, p, training=True: torch.nn.functional.dropout(x, p, training)
    try:
        yield
    finally:
        mt.model.attention, mt.model.dropout = fused, cheap


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
            idx = order[i:i + sentences]
            self.batches.append(Batch(pad([data.src[j] for j in idx]),
                                      pad([[BOS] + data.tgt[j] for j in idx]),
                                      pad([data.tgt[j] + [EOS] for j in idx]),
                                      sum(len(data.tgt[j]) + 1 for j in idx)))
        torch.manual_seed(self.cfg.train.seed)
        self.model = mt.model.make_model(self.cfg.model, len(base.src_vocab),
                                         len(base.tgt_vocab), PAD)
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
    best: float = 0.0  # fastest round's target tokens/s


def padding(batches: list[Batch]) -> float:
    total = sum(b.src.numel() + b.tgt_out.numel() for b in batches)
    real = sum(int((b.src != PAD).sum() + (b.tgt_out != PAD).sum()) for b in batches)
    return 1 - real / total


def mt_trainer(base: Trainer, amp: str, compiled: bool, run_dir: Path) -> Trainer:
    cfg = replace(base.cfg, train=replace(base.cfg.train, amp=amp, compile=compiled,
                                          eval_bleu=False, metric="loss"))
    t = Trainer(cfg, run_dir, "cpu")
    t.data = base.data
    run_dir.mkdir(parents=True)
    t.build()
    t.model.train()
    return t


def add_data_args(ap: argparse.ArgumentParser) -> None:
    """The options base_trainer reads: --config, --data, --threads."""
    ap.add_argument("--config", default=str(ROOT / "configs" / "multi30k_de_en.yaml"))
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "multi30k"))
    ap.add_argument("--threads", type=int, default=1)


def base_trainer(config: str, data: str, threads: int) -> tuple[Config, Trainer, Path]:
    """The config, a Trainer holding its tokenizers, vocabularies and data, and a scratch
    directory for the contenders' runs."""
    torch.set_num_threads(threads)
    cfg = load_config(config, [f"data.dir={data}", f"train.threads={threads}"])
    tmp = Path(tempfile.mkdtemp(prefix="bench_train."))
    base = Trainer(cfg, tmp / "base", "cpu")
    (tmp / "base").mkdir()  # a SentencePiece config copies its model into the run
    base.load_data()
    return cfg, base, tmp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_args(ap)
    ap.add_argument("--steps", type=int, default=20, help="steps per contender per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip", nargs="*", default=[], help="contenders to leave out, e.g. compiled")
    args = ap.parse_args()
    cfg, base, tmp = base_trainer(args.config, args.data, args.threads)
    vocab = len(base.tgt_vocab)
    n = args.steps * args.rounds
    batches = base.train_data.batches(cfg.train.max_tokens, seed=cfg.train.seed)[:n + 1]
    per_batch = sum(b.src.size(0) for b in batches) / len(batches)

    naive = Naive(base, round(per_batch), cfg.train.seed)
    contenders = [Contender("naive", naive.step, naive.batches[:n + 1])]
    for name, amp, compiled in (("mt fp32", "none", False), ("mt bf16", "bf16", False),
                                ("mt compiled", "none", True)):
        if name.split()[-1] not in args.skip:
            t = mt_trainer(base, amp, compiled, tmp / name.replace(" ", "_"))
            contenders.append(Contender(name, t.step, batches, t))
    for c in contenders:  # warm-up (and compilation) outside the timing, on a batch not timed
        clock = time.perf_counter()
        float(c.step(c.batches[-1]))
        print(f"{c.name}: first step {time.perf_counter() - clock:.1f} s", file=sys.stderr)
    for r in range(args.rounds):
        for c in contenders:
            chunk = c.batches[r * args.steps:(r + 1) * args.steps]
            clock = time.perf_counter()
            for b in chunk:
                c.step(b)
            if c.trainer is not None:
                c.trainer.stats.tolist()  # wait for the device (a no-op on CPU)
            rate = sum(b.n_tgt_tokens for b in chunk) / (time.perf_counter() - clock)
            c.best = max(c.best, rate)
            print(f"round {r + 1} {c.name}: {rate:.0f} tok/s", file=sys.stderr)

    rows = sum(b.src.numel() + b.tgt_in.numel() for b in batches) // (2 * len(batches))
    peak32 = matmul_peak(cfg, rows, vocab, torch.float32)
    peak16 = matmul_peak(cfg, rows, vocab, torch.bfloat16)
    print(f"\n{cfg.data.dir}: {len(base.train_data)} pairs; {args.steps} steps x {args.rounds} "
          f"rounds per contender, fastest round kept; {args.threads} thread(s); "
          f"matmul peak fp32 {peak32 / 1e9:.1f} GFLOP/s, bf16 {peak16 / 1e9:.1f} GFLOP/s\n")
    print("| contender | tok/s | padding | MFLOP/token | share of fp32 peak | "
          "share of bf16 peak | val loss |")
    print("|---|---|---|---|---|---|---|")
    best, val = {}, {}
    for c in contenders:
        used = c.batches[:n]
        per_token = sum(3 * forward_flops(cfg, b, vocab) for b in used) / sum(
            b.n_tgt_tokens for b in used)
        flops = c.best * per_token
        best[c.name] = c.best
        if c.trainer is not None:  # the weights' quality, so evaluated in fp32 for all
            c.trainer.amp = None
            val[c.name] = c.trainer.validate()["val_loss"]
        share16 = f"{flops / peak16:.0%}" if c.name == "mt bf16" else ""
        print(f"| {c.name} | {c.best:.0f} | {padding(used):.1%} | {per_token / 1e6:.1f} | "
              f"{flops / peak32:.0%} | {share16} | {val.get(c.name, '')} |")
    fp32 = best.get("mt fp32")
    print("\n| ratio | measured | target |\n|---|---|---|")
    print(f"| mt fp32 / naive, tok/s | {fp32 / best['naive']:.2f}x | >= 3x |")
    if "mt bf16" in best:
        print(f"| mt bf16 / mt fp32, tok/s | {best['mt bf16'] / fp32:.2f}x | >= 1.6x |")
        diff = val["mt bf16"] / val["mt fp32"] - 1
        print(f"| mt bf16 vs fp32, val loss after {n} steps | {diff:+.2%} | within 1% |")
    if "mt compiled" in best:
        print(f"| mt compiled / mt fp32, tok/s | {best['mt compiled'] / fp32:.2f}x | |")


if __name__ == "__main__":
    main()
