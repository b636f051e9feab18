"""Translation memories: pairs a person translated, found again by fuzzy match (docs/memory.md).

- `open_memory(where, langs)`: a memory by path (SQLite, sqlite.py) or by URL (PostgreSQL,
  postgres.py), as a `Memory` (store.py): `add`, `search`, `pairs`, `info`.
- match.py: the normalization, the words and the match percentage.
- training.py: each pair's best match among the others of a corpus (`best_matches`).
- files.py: the pairs of corpus files (through mt.corpus_formats) and a memory written as TMX
  or TSV.
"""

from __future__ import annotations

from pathlib import Path

from mt.memory.match import Match, normalize, score
from mt.memory.store import Memory

URL_SCHEMES = ("postgresql://", "postgres://")

__all__ = ["Match", "Memory", "is_url", "normalize", "open_memory", "score"]


def is_url(where: str | Path) -> bool:
    return str(where).startswith(URL_SCHEMES)


def open_memory(where: str | Path, langs: tuple[str, str] | None = None) -> Memory:
    """The memory at a path or a postgresql:// URL. With langs (source, target), one that does
    not exist yet is created as that pair, and one of another pair is a DataError; without,
    a missing memory is a DataError."""
    if is_url(where):
        from mt.memory.postgres import PostgresMemory

        memory = PostgresMemory(str(where), langs)
    else:
        from mt.memory.sqlite import SqliteMemory

        memory = SqliteMemory(Path(where), langs)
    if langs is not None:
        try:
            memory.check_langs(*langs)
        except BaseException:
            memory.close()
            raise
    return memory
