"""Batches of a few fixed shapes: lengths padded up to a ladder of sizes, and the pairs of one
(source size, target size) bucket cut into batches of one row count.

Token-budget batches of exact lengths give nearly every batch a new (B, T). On CPU each new
shape builds new oneDNN kernels, which are cached (memory) and rebuilt (time); torch.compile
recompiles and CUDA graphs cannot be captured. With buckets an epoch has at most two shapes a
bucket in use (its full batches and at most one other), the same every epoch for a fixed set of
pairs.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from mt.data import Batch, BatchPlan, shuffle_batches
from mt.vocab import PAD


def ladder(top: int = 4096) -> np.ndarray:
    """The sizes lengths are padded to: every even number to 16, then four steps an octave
    (20, 24, 28, 32, 40, 48, ...): padding below 25% of a length, about 8% on average."""
    sizes, step = list(range(2, 17, 2)), 4
    while sizes[-1] < top:
        sizes += list(range(sizes[-1] + step, 2 * sizes[-1] + 1, step))
        step *= 2
    return np.array(sizes, dtype=np.int64)


LADDER = ladder()


def bucket(lengths: np.ndarray) -> np.ndarray:
    """Each length rounded up to its size on the ladder."""
    return LADDER[np.searchsorted(LADDER, np.asarray(lengths, dtype=np.int64))]


def rows_for(src_size: np.ndarray, tgt_size: np.ndarray, max_tokens: int) -> np.ndarray:
    """Rows of a full batch of a bucket: as many as fit max_tokens padded tokens (at least 1)."""
    return np.maximum(1, max_tokens // (src_size + tgt_size))


def plan_bucketed(src_lens: np.ndarray, tgt_lens: np.ndarray, max_tokens: int,
                  seed: int | None = None) -> BatchPlan:
    """plan_batches' batches from buckets. A pair's bucket is its (source, target) sizes on the
    ladder, the target counted with its <bos> or <eos>. Buckets are taken smallest first; each
    is cut into full batches of rows_for(its sizes) pairs, and what is left over joins the next
    bucket at least as large on both sides (padded to its sizes), or, if none is, is a batch of
    its own. So a batch's pairs share one bucket, and an epoch has at most two shapes a bucket.
    Pairs are shuffled within their bucket, and the batches among themselves, when a seed is
    given. A pure function of its arguments: resume depends on it."""
    rng = np.random.default_rng(seed)
    n = len(src_lens)
    order = rng.permutation(n) if seed is not None else np.arange(n)
    src = bucket(np.asarray(src_lens)[order])
    tgt = bucket(np.asarray(tgt_lens)[order] + 1)
    by = np.lexsort((tgt, src))  # stable: shuffled within a bucket
    order, src, tgt = order[by], src[by], tgt[by]
    starts = np.flatnonzero(np.r_[True, (src[1:] != src[:-1]) | (tgt[1:] != tgt[:-1])])
    keys = sorted(zip(src[starts].tolist(), tgt[starts].tolist(), starts.tolist(),
                      np.r_[starts[1:], n].tolist()), key=lambda k: (k[0] + k[1], k[0]))
    members = {(s, t): order[a:b] for s, t, a, b in keys}
    pieces: list[np.ndarray] = []
    for i, (s, t, _, _) in enumerate(keys):
        pairs, rows = members.pop((s, t)), int(rows_for(s, t, max_tokens))
        full = len(pairs) // rows * rows
        pieces += [pairs[a:a + rows] for a in range(0, full, rows)]
        if full < len(pairs):
            up = next(((s2, t2) for s2, t2, _, _ in keys[i + 1:] if s2 >= s and t2 >= t), None)
            if up is None:
                pieces.append(pairs[full:])
            else:
                members[up] = np.concatenate([pairs[full:], members[up]])
    bounds = np.zeros(len(pieces) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in pieces], out=bounds[1:])
    plan = BatchPlan(np.concatenate(pieces).astype(np.int64) if pieces else order, bounds)
    return shuffle_batches(plan, rng) if seed is not None else plan


def widen(batch: Batch) -> Batch:
    """The batch with PAD columns up to its lengths' sizes on the ladder (a bucketed plan's
    batch: then every batch of a bucket has one shape)."""
    src_size, tgt_size = (int(bucket(t.size(1))) for t in (batch.src, batch.tgt_in))

    def wider(t: torch.Tensor, size: int) -> torch.Tensor:
        return F.pad(t, (0, size - t.size(1)), value=PAD)

    return Batch(wider(batch.src, src_size), wider(batch.tgt_in, tgt_size),
                 wider(batch.tgt_out, tgt_size), batch.n_tgt_tokens)
