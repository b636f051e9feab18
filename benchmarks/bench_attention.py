"""torch's fused attention against mt's hand-written form, on this machine's CPU (or GPU).

    python -m benchmarks.bench_attention [--threads 2] [--rounds 20] [--device cpu]
    python -m benchmarks.bench_attention --smoke     # one round: does it still run?

`mt.kernels.attention` picks one of the two per call (`fused_is_faster`): by device, dtype,
dropout and whether gradients are on. This prints, for Multi30k-sized shapes (4 heads of 64,
padding masks or causal), the time of each form, forward and backward (training) or forward
only (decoding: one query position against a cache, or a whole sentence), in fp32 and bf16;
then which form mt picks and whether it is the faster one. Rerun it after a torch upgrade.
The two forms take turns, one call each per round, and each keeps its fastest round: noise
only ever adds time. A benchmark to run by hand on an otherwise idle machine, not a test.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from benchmarks.harness import alternate, markdown, parse, parser
from mt.kernels import attention, fused_is_faster

HEADS, DH = 4, 64
# (label, batch, query length, key length, causal); batches hold about 2,500 target tokens
SHAPES = [
    ("train, self-attention", 100, 25, 25, True),
    ("train, cross-attention", 100, 25, 25, False),
    ("train, longer", 60, 40, 40, False),
    ("decode step, greedy", 100, 1, 25, False),
    ("decode step, beam 5", 500, 1, 25, False),
    # beam search's cross-attention: a sentence's 5 hypotheses as 5 queries of its one source
    ("decode step, beam 5, cross-attention", 100, 5, 25, False),
    ("encode short sentences", 200, 10, 10, False),
    ("encode / validate", 100, 25, 25, False),
]


def fused(q, k, v, mask, causal):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)


def hand(q, k, v, mask, causal):
    # asking for the weights always takes mt's hand-written form, at no extra cost
    return attention(q, k, v, mask, causal, need_weights=True)[0]


def timed(fn, inputs, mask, causal, train: bool):
    """A contender: each round, the seconds of one call (forward and backward when training)."""
    def run(r: int) -> float:
        start = time.perf_counter()
        with torch.set_grad_enabled(train):
            out = fn(*inputs, mask, causal)
            if train:
                out.float().sum().backward()
        if out.device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start
    return run


def main() -> None:
    ap = parser(__doc__, rounds=20, smoke="1 round")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    args = parse(ap, {"rounds": 1})
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dev = torch.device(args.device)
    print(f"{dev}, {args.threads} threads, torch {torch.__version__}, best of {args.rounds}")
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        for label, B, T, L, causal in SHAPES:
            train = label.startswith("train")
            q, k, v = (torch.randn(B, HEADS, n, DH, device=dev, dtype=dtype,
                                   requires_grad=train) for n in (T, L, L))
            mask = None if causal else torch.rand(B, 1, 1, L, device=dev) > 0.1
            best = alternate({"fused": timed(fused, (q, k, v), mask, causal, train),
                              "hand": timed(hand, (q, k, v), mask, causal, train)}, args.rounds)
            with torch.set_grad_enabled(train):
                picks_fused = fused_is_faster(q, 0.0)
            ratio = best["fused"] / best["hand"]
            right = (ratio < 1) == picks_fused or abs(ratio - 1) < 0.05
            rows.append([str(dtype).removeprefix("torch."), label, f"({B}, {T}, {L})",
                         f"{best['fused'] * 1e3:.3f}", f"{best['hand'] * 1e3:.3f}",
                         f"{ratio:.2f}", "fused" if picks_fused else "hand",
                         "yes" if right else "NO"])
    print(markdown(["dtype", "call", "shape (B, T, L)", "fused ms", "hand ms", "fused / hand",
                    "mt picks", "right"], rows))


if __name__ == "__main__":
    main()
