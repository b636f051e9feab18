"""Sampling (decode.sampling topk or topp): one token per row drawn from the temperature's
distribution cut to the k best or to the nucleus, from uniforms seeded per sentence and
sample, so that a line's samples do not depend on the lines that share its batch.

Shapes: r rows, V vocab.
"""

from __future__ import annotations

import hashlib

import torch

from mt.config import DecodeConfig
from mt.decoding.search import CHUNK
from mt.vocab import PAD


def sample_seed(seed: int, ids: list[int], copy: int) -> int:
    """The seed of one sample's generator, from decode.seed, the sentence's source ids (no
    padding) and the sample's number: so a line's samples do not depend on the lines that
    share its batch (the Translator sorts lines into batches by length)."""
    key = f"{seed} {copy} {' '.join(map(str, ids))}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 1


NUCLEUS_BINS, BINS_PER_NAT = 2048, 64  # topp: log-probability bins, down to 32 nats (nucleus)


def nucleus(probs: torch.Tensor, p: float, logits: torch.Tensor | None = None) -> torch.Tensor:
    """probs (r, V) -> (r, V) bool: the smallest set of most likely tokens whose mass reaches p
    (a token is kept while the mass of those more likely has not reached p); logits: those of
    probs (their softmax), if at hand.

    Without sorting rows: a flat row's nucleus holds thousands of tokens, and sorting whole rows
    cost as much as the model's step. Tokens are binned by how far their log-probability lies
    below the row's best (1/64 nat a bin); the bins' cumulative mass finds the bin where the mass
    reaches p, and only that bin's few tokens are sorted."""
    if p >= 1:
        return probs > 0
    if logits is None:
        logits = probs.log()  # -inf where a probability underflowed
    gap = logits.amax(-1, keepdim=True) - logits  # (r, V) log-probability below the best, >= 0
    bins = (gap * BINS_PER_NAT).clamp(max=NUCLEUS_BINS - 1).long()
    mass = probs.new_zeros(probs.size(0), NUCLEUS_BINS).scatter_add_(1, bins, probs)
    cum = mass.cumsum(-1)  # (r, bins): the mass down to each bin
    k = (cum < p).sum(-1, keepdim=True).clamp(max=NUCLEUS_BINS - 1)  # (r, 1) the boundary bin
    above = (cum - mass).gather(1, k)  # (r, 1) the mass of the bins before it
    inside = bins == k
    vals, ids = (probs * inside).topk(int(inside.sum(-1).max()), dim=-1)  # its tokens, sorted
    take = (above + vals.cumsum(-1) - vals < p) & (vals > 0)
    return (bins < k) | torch.zeros_like(inside).scatter_(1, ids, take)


def draw(logits: torch.Tensor, cfg: DecodeConfig, u: torch.Tensor) -> torch.Tensor:
    """logits (r, V), uniforms u (r, 2) in [0, 1) -> (r,) one token per row from
    softmax(logits / temperature), cut to the decode.topk best or to the decode.topp `nucleus`
    and renormalised: the same logits and uniforms give the same token, whatever the rest of
    the batch.

    Top-k inverts the k best's CDF at u[:, 0]. Top-p draws first and cuts after: a token drawn
    from the whole row at u[:, 0] is kept when it lies in the nucleus (the mass of the tokens
    more likely than it is below p), which it does with probability >= p; so a kept token has
    the nucleus's distribution, and only the rows that drew outside it (u[:, 1] inverts their
    nucleus) pay for finding the nucleus. A token of probability above 1 - p needs no check:
    the others together hold less than p.
    """
    logits = logits.float()
    if cfg.temperature != 1.0:
        logits = logits / cfg.temperature
    probs = logits.softmax(-1)
    if cfg.sampling == "topk":  # only the k best need sorting
        top, ids = probs.topk(min(cfg.topk, probs.size(-1)), dim=-1)
        return ids.gather(1, _inverted(top, u[:, 0])).squeeze(1)
    token = _inverted(probs, u[:, 0])  # (r, 1)
    mine = probs.gather(1, token)
    check = (mine <= 1 - cfg.topp).squeeze(1).nonzero().squeeze(1)
    if check.numel():
        rows, mine = probs[check], mine[check]
        more_likely = torch.where(rows > mine, rows, 0.0).sum(-1)
        out = (more_likely >= cfg.topp).nonzero().squeeze(1)
        if out.numel():
            cut = rows[out] * nucleus(rows[out], cfg.topp)
            token[check[out]] = _inverted(cut, u[check[out], 1])
    return token.squeeze(1)


def _inverted(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """weights (r, K) >= 0, u (r,) -> (r, 1) the column where their cumulative sum passes u
    times its total: the first column whose cumulative sum exceeds it, so never one of weight
    0 (rounding that overshoots the total takes the last column of weight > 0).

    Over vocabulary-sized rows, like `argmax`: a cumulative sum over chunk sums finds the
    chunk, one over the chunk's CHUNK weights the column; a row's cumulative sum is a serial
    pass that costs more than the rest together."""
    r, K = weights.shape
    if K < 4 * CHUNK:
        cum = weights.cumsum(-1)
        return _passes(weights, cum, u[:, None] * cum[:, -1:])
    whole = K - K % CHUNK
    sums = weights[:, :whole].view(r, -1, CHUNK).sum(-1)  # (r, K // CHUNK)
    if whole < K:
        sums = torch.cat([sums, weights[:, whole:].sum(-1, keepdim=True)], dim=1)
    cum = sums.cumsum(-1)
    target = u[:, None] * cum[:, -1:]  # (r, 1)
    chunk = _passes(sums, cum, target)  # (r, 1)
    cols = chunk * CHUNK + torch.arange(CHUNK, device=weights.device)  # (r, CHUNK)
    inside = weights.gather(1, cols.clamp(max=K - 1)) * (cols < K)  # the last chunk is short
    local = _passes(inside, inside.cumsum(-1), target - (cum - sums).gather(1, chunk))
    return cols.gather(1, local)


def _passes(weights: torch.Tensor, cum: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """weights (r, K) >= 0, their cumulative sums, target (r, 1) -> (r, 1) the first column
    whose cumulative sum exceeds target; the last of weight > 0 where none does."""
    at = torch.searchsorted(cum, target, right=True)
    last = ((weights > 0) * torch.arange(1, weights.size(1) + 1, device=weights.device)).amax(-1)
    return torch.minimum(at, (last - 1).clamp(min=0)[:, None])


def uniforms(src: torch.Tensor, cfg: DecodeConfig, limits: torch.Tensor) -> torch.Tensor:
    """The uniforms of a batch src (B, S)'s decode.samples samples, whose length limits are
    limits (B,): (B * samples, steps, 2), two per step (`draw`) from each sample's own CPU
    torch.Generator, seeded by `sample_seed` (on CPU, the model's logits do not depend on the
    batch either)."""
    n = cfg.samples
    out = torch.zeros(src.size(0) * n, int(limits.max()) + 1, 2)  # (B * n, steps, 2)
    for s, (ids, limit) in enumerate(zip(src.tolist(), limits.tolist(), strict=True)):
        ids = [i for i in ids if i != PAD]
        for j in range(n):
            g = torch.Generator().manual_seed(sample_seed(cfg.seed, ids, j))
            for k in range(2):  # the first stream as it always was: top-k's draws unchanged
                out[s * n + j, : limit + 1, k] = torch.rand(limit + 1, generator=g)
    return out.to(src.device)
