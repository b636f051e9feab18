"""Training-time retrieval: each training pair's best match among the others (neural fuzzy
repair, Bulte & Tezcan 2019), for `data.memory` to call once and cache.

A pair's match is never itself nor a duplicate of it (the same source and target, whitespace
collapsed): a model trained on its own target as the match would learn only to copy. The
retrieval is the memory's (mt.memory.store): the same candidates and score as `mt memory search`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from mt.memory.match import Match, normalize
from mt.memory.store import Memory

SPARE = 8  # matches asked for beyond the first: room for the pair itself and its duplicates


def best_match(memory: Memory, source: str, target: str, threshold: float = 0.0
               ) -> Match | None:
    """The best match for (source, target) in memory scoring at least threshold, other than
    the pair itself and its duplicates; None if none."""
    own = normalize(source), normalize(target)
    for m in memory.search(source, k=1 + SPARE, threshold=threshold):
        if (normalize(m.source), normalize(m.target)) != own:
            return m
    return None


def best_matches(pairs: Sequence[tuple[str, str]], threshold: float = 0.0,
                 memory: Memory | None = None, progress: Callable[[int], None] | None = None
                 ) -> list[Match | None]:
    """For each (source, target) of pairs, in order, its best match (or None) scoring at
    least threshold: from memory if given, else from the pairs themselves, indexed once in a
    temporary SQLite memory. progress, if given, is called with each batch's size."""
    if memory is not None:
        return _each(memory, pairs, threshold, progress)
    from mt.memory.sqlite import SqliteMemory

    with tempfile.TemporaryDirectory(prefix="mt-memory-") as tmp, \
            SqliteMemory(Path(tmp) / "corpus.db", ("src", "tgt")) as own:
        own.add(pairs)
        return _each(own, pairs, threshold, progress)


def _each(memory: Memory, pairs: Sequence[tuple[str, str]], threshold: float,
          progress: Callable[[int], None] | None, batch: int = 1000) -> list[Match | None]:
    found: list[Match | None] = []
    for start in range(0, len(pairs), batch):
        chunk = pairs[start:start + batch]
        found += [best_match(memory, s, t, threshold) for s, t in chunk]
        progress and progress(len(chunk))
    return found
