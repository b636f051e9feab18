"""One decoding step, the unit the search loop (mt.decoding.search) calls: the live rows' newest
tokens and the cache (which holds the position) -> their next-token scores, the cache a
position further, and what the record asked for. Greedy, sampling and beam search, with all
they record, go through it; so does an ensemble, each member's step its own.

The cache is a StaticCache (mt.static_cache): keys and values preallocated and written in
place, rows compacted only at the rungs of a ladder. With decode.compile (mt.decoding.compiled)
its step runs compiled, over padded shapes. STATIC False keeps the cache that grows each step
(mt.model.DecoderCache), the design before it: what benchmarks/bench_fast.py compares against.

Shapes: r live rows, S source length, V vocabulary.
"""

from __future__ import annotations

from typing import Any

import torch

from mt.decoding import compiled

STATIC = True  # the static cache (False: the cache that grows each step; a benchmark's lever)


def static(model, cache: Any, src: torch.Tensor, length: int, mode: str) -> Any:
    """A search's fresh cache for src (B, S) as the step runs it: static, for `length` steps,
    compiled where decode.compile `mode` asks (mt.decoding.compiled.wanted)."""
    if not STATIC:
        return cache
    if compiled.wanted(mode, model, src):
        return cache.to_static(length, padded=True, core=compiled.step_of)
    return cache.to_static(length)


def step(model, prev: torch.Tensor, cache: Any, weights: bool, members: bool
         ) -> tuple[torch.Tensor, Any, list | None, list | None]:
    """The newest tokens prev (r, 1) -> the model's next-token scores (r, V) (its
    next_scores), the cache extended, each decoder layer's cross-attention (r, H, 1, S) where
    `weights`, each member's log-probabilities (r, 1, V) where `members` (an ensemble's, for a
    trace); None for what was not asked."""
    if members:
        states, cache, layers, each = model.decode(prev, cache, need_weights=True, members=True)
    elif weights:
        (states, cache, layers), each = model.decode(prev, cache, need_weights=True), None
    else:
        (states, cache), layers, each = model.decode(prev, cache), None, None
    return model.next_scores(states[:, -1]), cache, layers, each
