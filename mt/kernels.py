"""CPU-aware kernels the model is built from: dropout with a cheaper CPU mask, attention that
picks torch's fused kernel or the hand-written form by the rule `fused_is_faster`, a history
reordered and extended in one copy (`extend`: the decoder's cache, a search's record), and the
log-softmax with its entropy that a traced search takes (mt.decoding.record).

Shapes: B batch, H heads, T queries, L keys, Dh head dim.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """F.dropout, with a mask that is cheaper to draw on CPU.

    torch's CPU dropout draws one random number per element, a visible share of a training
    step (see benchmarks/bench_train.py); this one reads the mask from random bytes, four from
    each 32-bit draw, so the rate is rounded to a multiple of 1/256 (0.3 acts as 77/256 =
    0.301). On GPUs, torch's own fused kernel is used as it is.
    """
    if not training or p <= 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, training=True)
    mask = _keep_mask(x, p)
    return x if mask is None else _Dropout.apply(x, *mask)


class _Dropout(torch.autograd.Function):
    """x * keep * scale, keeping the bool mask for backward: a quarter of a float32 mask's
    memory. The scale is applied as a float, never as a mask of x's dtype (a bf16 mask would
    round it: 1.2488 to 1.25 at p=0.2)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return x.mul(keep).mul_(scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None, None


def _keep_mask(x: torch.Tensor, p: float) -> tuple[torch.Tensor, float] | None:
    """`dropout`'s CPU mask for x: (keep, bool like x; the scale), or None where nothing is
    dropped (p rounds to 0/256)."""
    cut = min(round(p * 256), 255)  # bytes below cut are dropped
    if cut == 0:
        return None
    n = x.numel()
    draws = torch.empty((n + 3) // 4, dtype=torch.int32).random_(-2**31, 2**31)
    return draws.view(torch.uint8)[:n].view(x.shape) >= cut, 256 / (256 - cut)


class _ReluDropout(torch.autograd.Function):
    """dropout(relu(x)) saving only its output, which the next layer saves anyway: the output
    is positive exactly where the gradient passes (x > 0 and kept). Apart, relu saves its output
    and dropout its mask, a second and a third copy of the feed-forward's widest activation."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
        out = x.relu().mul_(keep).mul_(scale)
        ctx.save_for_backward(out)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (out,) = ctx.saved_tensors
        return grad.mul(out > 0).mul_(ctx.scale), None, None


def relu_dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """dropout(relu(x), p) with `dropout`'s mask, the same values; on CPU its backward keeps
    one tensor the size of x, not three."""
    if not training or p <= 0.0:
        return torch.relu(x)
    if x.device.type != "cpu":
        return F.dropout(torch.relu(x), p, training=True)
    mask = _keep_mask(x, p)
    return torch.relu(x) if mask is None else _ReluDropout.apply(x, *mask)


class Dropout(nn.Module):
    """nn.Dropout with `dropout`'s cheaper CPU mask."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)


FEW_QUERIES = 16  # the most queries a row for which reduced precision takes the hand-written form


def fused_is_faster(q: torch.Tensor, p: float) -> bool:
    """The rule by which `attention` picks its form: True for torch's fused kernel
    (F.scaled_dot_product_attention), False for the hand-written one below.

    On GPUs the fused kernel is always taken. On CPU neither form wins everywhere: the fused
    kernel is faster for float32 with gradients (training) and for reduced precision (bf16
    under autocast) without them (translating), the hand-written form for float32 without
    gradients, for reduced precision with them, and for reduced precision without them where
    a row holds 2 to FEW_QUERIES queries (beam search's cross-attention, short sentences).
    With dropout torch's CPU kernel falls back to the same computation as the hand-written
    form, with a slower mask, so dropout always takes the hand-written form. The rule follows
    benchmarks/bench_attention.py, which times both forms on Multi30k-sized shapes and
    reports whether the rule picks the faster one; rerun it after a torch upgrade. (Judge a
    change by whole translations, as benchmarks/bench_decode.py times them, not by one
    decoding step alone.)
    """
    if q.device.type != "cpu":
        return True
    if p != 0.0:
        return False
    if torch.is_grad_enabled():
        return q.dtype == torch.float32
    # a few queries a row: beam search's cross-attention (its K hypotheses of a sentence
    # against their one source) and short sentences, where the fused kernel's work per row
    # outweighs its fusion in reduced precision
    return q.dtype != torch.float32 and not 1 < q.size(-2) <= FEW_QUERIES


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
              is_causal: bool = False, p: float = 0.0, need_weights: bool = False
              ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Scaled dot-product attention; mask is boolean, True where attention is allowed.

    q (B, H, T, Dh), k/v (B, H, L, Dh), mask broadcastable to (B, H, T, L) -> (B, H, T, Dh).
    The fused kernel cannot return weights, so they are computed by hand when asked, and on
    CPU where the hand-written form is faster (`fused_is_faster`).
    """
    if not need_weights and fused_is_faster(q, p):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p,
                                             is_causal=is_causal)
        return out, None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, L)
    if is_causal:
        mask = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return dropout(weights, p) @ v, (weights if need_weights else None)


def extend(past: torch.Tensor, order: torch.Tensor | None, new: torch.Tensor, dim: int
           ) -> torch.Tensor:
    """past's rows (dim 0) picked by order (None: all, as they are), then new appended along
    dim: a decoder's self-attention keys (B, H, P, Dh) extended by a step's (B, H, 1, Dh) at dim
    2, a search's record of attention (r, t, S) by a step's (r, 1, S) at dim 1. The picked rows
    are written straight into the result, so a reordered history is copied once a step, not
    once to reorder and once to grow."""
    if order is None:
        return torch.cat([past, new], dim=dim)
    P = past.size(dim)
    shape = list(new.shape)
    shape[dim] += P
    out = new.new_empty(shape)
    torch.index_select(past, 0, order, out=out.narrow(dim, 0, P))
    out.narrow(dim, P, new.size(dim)).copy_(new)
    return out


# rows at a time: a slice still in the cache when the next pass reads it (one buffer; two for
# the entropy); micro-benchmarks in docs/benchmarks.md#beam-search-without-the-log-softmax and
# docs/confidence.md
LSE_ROWS = 32
ENTROPY_ROWS = 16


def _row_max(x: torch.Tensor) -> torch.Tensor:
    """(r, 1) each row's maximum, 0 for a row of -inf (or one holding +inf): no inf - inf."""
    m = x.amax(-1, keepdim=True)
    return m.masked_fill(m.isinf(), 0.0)


def logsumexp(x: torch.Tensor) -> torch.Tensor:
    """x (r, V) float -> log(sum(exp(x))) of each row (r,), as x.logsumexp(-1).

    On CPU, LSE_ROWS rows at a time through one buffer that stays in the cache: torch's own
    writes a whole (r, V) temporary and is slower than the log-softmax it would replace."""
    if x.device.type != "cpu":
        return x.logsumexp(-1)
    r, V = x.shape
    m, out = _row_max(x), x.new_empty(r)
    buf = x.new_empty(min(LSE_ROWS, r), V)
    for i in range(0, r, LSE_ROWS):
        rows = buf[: min(LSE_ROWS, r - i)]
        torch.sub(x[i: i + LSE_ROWS], m[i: i + LSE_ROWS], out=rows).exp_()
        torch.sum(rows, -1, out=out[i: i + LSE_ROWS])
    return out.log_().add_(m.squeeze(1))


def logsumexp_entropy(x: torch.Tensor, normalized: bool = False
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits x (r, V) float -> each row's logsumexp (r,) and the entropy (r,), in nats, of
    its softmax (0 * log 0 = 0): the log-probabilities are x less the first, never written.
    normalized: x are log-probabilities already: logsumexp 0, entropy -sum(exp(x) * x).

    With d = x - max and e = exp(d) (ENTROPY_ROWS rows at a time on CPU, in two buffers that
    stay in the cache), the entropy is log(sum e) - sum(e * d) / sum e: no difference of two
    large numbers, so as exact as the log-softmax's own."""
    r, V = x.shape
    m = x.new_zeros(r, 1) if normalized else _row_max(x)
    sums, dots = x.new_empty(r), x.new_empty(r)
    step = ENTROPY_ROWS if x.device.type == "cpu" else max(r, 1)
    buf = x.new_empty(2, min(step, r), V)
    for i in range(0, r, step):
        d = buf[0, : min(step, r - i)]
        e = torch.exp(torch.sub(x[i: i + step], m[i: i + step], out=d), out=buf[1, : len(d)])
        torch.sum(e, -1, out=sums[i: i + step])
        torch.sum(e.mul_(d), -1, out=dots[i: i + step])
    bad = dots.isnan()  # a -inf logit: 0 * -inf; rare, so mended only where it is
    if bad.any():
        d = x[bad] - m[bad]
        dots[bad] = (d.exp() * d).nan_to_num().sum(-1)
    if normalized:
        return x.new_zeros(r), -dots
    log_sums = sums.log()
    return log_sums + m.squeeze(1), log_sums - dots / sums
