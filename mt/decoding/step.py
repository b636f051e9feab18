"""One decoding step, the unit the search loop (mt.decoding.search) calls: the live rows' newest
tokens and the cache (which holds the position) -> their next-token scores, the cache a
position further, and what the record asked for. Greedy, sampling and beam search, with all
they record, go through it; so does an ensemble, each member's step its own.

An eager step keeps the cache that grows each step (mt.model.DecoderCache). With
decode.compile (mt.decoding.compiled) the cache is a StaticCache (mt.static_cache): keys and
values preallocated and written in place, rows compacted only at the rungs of a ladder, the
few padded shapes a compiled step needs. STATIC True gives an eager step the static cache too:
benchmarks/bench_fast.py's "static" lever, measured slower than the growing cache when eager
(docs/benchmarks.md#fast-decoding-levers), hence not the default.

Shapes: r live rows, S source length, V vocabulary.
"""

from __future__ import annotations

from typing import Any

import torch

from mt.decoding import compiled
from mt.decoding.request import SearchRequest
from mt.static_cache import bucket

STATIC = False  # True: the static cache in an eager step too (a benchmark's lever)


def static(model, cache: Any, request: SearchRequest, length: int) -> Any:
    """A search's fresh cache as the step runs it: as it is where the step is eager (static,
    for `length` steps, with STATIC), static and padded where request.cfg.compile asks for a
    compiled step (mt.decoding.compiled.wanted)."""
    cfg, src = request.cfg, request.src
    if not compiled.wanted(cfg.compile, model, src):
        return cache.to_static(length) if STATIC else cache
    # as long as the longest source of src's rung would allow: one length per rung
    longest = int(cfg.max_len_a * bucket(src.size(1)) + cfg.max_len_b) + 1
    return cache.to_static(max(length, longest), padded=True, core=compiled.step_of)


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
