"""data.memory's matches, computed once per corpus and cached beside its token cache entry:
each of the entry's pairs' best match (its score, target and source) at or above the
threshold, from the training corpus itself (a pair never its own match: mt.memory.training), a
memory, or a corpus file made a memory for the purpose.

$MT_CACHE_DIR/matches/<entry>.<key>.json, key: a hash of the threshold, where the matches
come from (a memory's or a file's identity: its path, size and modification time) and how they
are found (mt.memory.store.RETRIEVAL). Written
atomically when complete; a run, its resume and the next run with the same settings read it.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from tqdm import tqdm

from mt import log
from mt.config import DataConfig, MemoryConfig
from mt.corpus_formats import CorpusSource
from mt.errors import DataError
from mt.filters import PairFilter
from mt.memory import Memory, is_url, open_memory
from mt.memory.files import file_pairs
from mt.memory.store import RETRIEVAL
from mt.textio import atomic_write, file_identity
from mt.token_cache.builder import kept_chunks
from mt.token_cache.entry import CacheEntry
from mt.token_cache.keys import cache_root, short_hash

SQLITE = b"SQLite format 3\0"  # the first bytes of every SQLite file: a memory, not a corpus

Matches = list[tuple[float, str, str] | None]  # per entry pair: (score, target, source)
FORMAT = 2  # in the key: a cache of another format (1: no source) is computed again


def entry_pairs(corpus: CorpusSource, d: DataConfig) -> list[tuple[str, str]]:
    """The corpus's pairs as its entry holds them: data.filter applied in the builder's
    chunks, so pair i is the entry's pair i."""
    return [p for chunk in kept_chunks(corpus, PairFilter(d.filter)) for p in chunk]


def is_memory(where: str) -> bool:
    """Whether data.memory.path is a memory (a URL or an SQLite file), not a corpus file."""
    if is_url(where):
        return True
    path = Path(where)
    if not path.is_file():
        return False
    with open(path, "rb") as f:
        return f.read(len(SQLITE)) == SQLITE


def _source_key(m: MemoryConfig) -> object:
    """What the matches come from, as the cache's key holds it."""
    if not m.path:
        return "itself"
    if is_url(m.path):
        return m.path
    path = Path(m.path)
    if path.is_file():
        return file_identity(path)
    return [file_identity(p) for p in sorted(path.parent.glob(path.name + ".*"))]


def cached_matches(entry: CacheEntry, corpus: CorpusSource, d: DataConfig) -> Matches:
    """Each of the entry's pairs' best match by data.memory (d.memory, on), read from the cache
    or computed (a progress bar, then the time it took, logged) and written there."""
    m = d.memory
    key = short_hash([m.threshold, _source_key(m), RETRIEVAL, FORMAT])
    path = cache_root() / "matches" / f"{entry.path.name}.{key}.json"
    if path.is_file():
        return [tuple(x) if x else None for x in json.loads(path.read_text(encoding="utf-8"))]
    pairs = entry_pairs(corpus, d)
    if len(pairs) != entry.meta["pairs"]:
        raise DataError(f"{corpus}: {len(pairs)} pairs read, its token cache has "
                        f"{entry.meta['pairs']}; it changed while training began: run again")
    started = time.perf_counter()
    bar = tqdm(desc=f"memory matches {corpus.name}", total=len(pairs), unit=" pairs",
               unit_scale=True, disable=None, file=sys.stderr, dynamic_ncols=True)
    with _memory(m, (d.src_lang, d.tgt_lang)) as memory:
        found = _best(pairs, m.threshold, memory, bar.update)
    bar.close()
    matched = sum(x is not None for x in found)
    log.info(f"data.memory: {corpus.name}: {matched} of {len(pairs)} pairs have a match of "
             f"{m.threshold:g}% or more ({time.perf_counter() - started:.0f} s)")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(found, ensure_ascii=False),
                                                        encoding="utf-8"))
    return found


def _best(pairs: Sequence[tuple[str, str]], threshold: float, memory: Memory | None,
          progress: Callable[[int], None]) -> Matches:
    from mt.memory.training import best_matches

    return [None if x is None else (round(x.score, 2), x.target, x.source)
            for x in best_matches(pairs, threshold, memory, progress)]


@contextlib.contextmanager
def _memory(m: MemoryConfig, langs: tuple[str, str]) -> Iterator[Memory | None]:
    """The memory the matches come from: None (the corpus itself), one opened, or a corpus
    file's pairs in a temporary memory."""
    if not m.path:
        yield None
    elif is_memory(m.path):
        with open_memory(m.path) as memory:
            memory.check_langs(*langs, what="this run's languages (data.memory.path)")
            yield memory
    else:
        pairs = file_pairs(m.path, langs)
        with tempfile.TemporaryDirectory(prefix="mt-memory-") as tmp, \
                open_memory(Path(tmp) / "memory.db", langs) as memory:
            memory.add(pairs)
            yield memory
