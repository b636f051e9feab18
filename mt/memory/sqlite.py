"""A memory in one SQLite file (the default): WAL, a transaction per write, many readers.

Tables: `meta` (the language pair, when created, the layout's version), `pairs` (id, source,
target, the pair's hash, unique: a pair added again is kept once, moved to the latest id; the
source key's hash, indexed: the exact matches) and `words`, an FTS5 index of each source's key
without a copy of it (contentless), and `vocab`, how many sources hold each word (FTS5's own
vocabulary table counts them by reading each word's whole list: 7 ms a query at 100,000
pairs). Writers wait for each other (BEGIN IMMEDIATE, up to BUSY_SECONDS); with
synchronous=FULL a committed batch survives the process (and the machine) dying. A file that is
not SQLite, is damaged, or holds no memory is a DataError naming it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from mt.errors import DataError
from mt.memory.match import terms
from mt.memory.store import VERSION, Memory, key_hash, now, pair_hash

BUSY_SECONDS = 600.0  # how long a writer waits for another's transaction (a large batch)
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pairs (id INTEGER PRIMARY KEY, source TEXT NOT NULL,
    target TEXT NOT NULL, hash BLOB NOT NULL UNIQUE, key_hash INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS pairs_key ON pairs (key_hash);
CREATE VIRTUAL TABLE IF NOT EXISTS words USING fts5 (key, content='',
    tokenize="unicode61 remove_diacritics 0 tokenchars '_'");
CREATE TABLE IF NOT EXISTS vocab (term TEXT PRIMARY KEY, df INTEGER NOT NULL) WITHOUT ROWID;
"""


@contextmanager
def damaged(path: Path) -> Iterator[None]:
    """SQLite's errors for a file that is not a sound database, as one DataError line."""
    try:
        yield
    except sqlite3.DatabaseError as e:
        raise DataError(f"{path}: not a readable translation memory ({e}); give a memory made "
                        "by mt memory add, or restore it from a copy") from None


def _phrase(word: str) -> str:
    """A word as an FTS5 query: quoted, so that one like "and" or "near" is not an operator."""
    return '"' + word.replace('"', '""') + '"'


class SqliteMemory(Memory):
    def __init__(self, path: Path, langs: tuple[str, str] | None = None):
        """Open the memory at path; with langs, create it (as that pair) if missing."""
        self.path, self.name = Path(path), str(path)
        if not self.path.exists() and langs is None:
            raise DataError(f"{path}: no such memory; make one with mt memory add")
        if self.path.is_dir():
            raise DataError(f"{path}: a directory, not a memory")
        with damaged(self.path):
            self.db = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None,
                                      check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            if langs is not None:
                with self._write():
                    for statement in filter(str.strip, SCHEMA.split(";")):
                        self.db.execute(statement)  # executescript would commit first
                    self.db.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)", [
                        ("src", langs[0]), ("tgt", langs[1]), ("created", now()),
                        ("version", VERSION)])
            meta = dict(self._read("SELECT name, value FROM meta"))
        self.langs, self.created = (meta["src"], meta["tgt"]), meta["created"]

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        with damaged(self.path):
            try:
                return self.db.execute(sql, args).fetchall()
            except sqlite3.OperationalError as e:
                if "no such table" in str(e):
                    raise DataError(f"{self.path}: an SQLite file, but not a translation "
                                    "memory (no table of pairs)") from None
                raise

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One transaction: committed whole, or rolled back."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _insert(self, pairs: list[tuple[str, str]]) -> int:
        added = 0
        with damaged(self.path), self._write():
            for source, target in pairs:
                row = self.db.execute(
                    "INSERT OR IGNORE INTO pairs (source, target, hash, key_hash) "
                    "VALUES (?, ?, ?, ?)", (source, target, pair_hash(source, target),
                                            key_hash(source)))
                if not row.rowcount:
                    self._renew(source, target)
                    continue
                words = terms(source)
                self.db.execute("INSERT INTO words (rowid, key) VALUES (?, ?)",
                                (row.lastrowid, " ".join(words)))
                self.db.executemany("INSERT INTO vocab VALUES (?, 1) ON CONFLICT (term) "
                                    "DO UPDATE SET df = df + 1", [(w,) for w in words])
                added += 1
        return added

    def _renew(self, source: str, target: str) -> None:
        """Make a pair already held the latest: a new id after every other, in pairs and in
        the word index (its counts in vocab stay). FTS5 deletes a contentless row given the
        words it was indexed with: terms(source), as when it was added (terms is part of
        the layout, VERSION)."""
        (old,), = self.db.execute("SELECT id FROM pairs WHERE hash = ?",
                                  (pair_hash(source, target),)).fetchall()
        (last,), = self.db.execute("SELECT max(id) FROM pairs").fetchall()
        if old == last:
            return
        indexed = " ".join(terms(source))
        self.db.execute("UPDATE pairs SET id = ? WHERE id = ?", (last + 1, old))
        self.db.execute("INSERT INTO words (words, rowid, key) VALUES ('delete', ?, ?)",
                        (old, indexed))
        self.db.execute("INSERT INTO words (rowid, key) VALUES (?, ?)", (last + 1, indexed))

    def frequencies(self, words: list[str]) -> dict[str, int]:
        marks = ",".join("?" * len(words))
        return dict(self._read(f"SELECT term, df FROM vocab WHERE term IN ({marks})",
                               tuple(words))) if words else {}

    def ids_holding(self, word: str, latest: int | None = None) -> np.ndarray:
        # one string of ids from SQLite, parsed by numpy: a row per id through the cursor
        # costs more than FTS5's reading of the word's list
        (ids,), = self._read("SELECT group_concat(rowid) FROM (SELECT rowid FROM words WHERE "
                             "words MATCH ? ORDER BY rowid DESC LIMIT ?)",
                             (_phrase(word), -1 if latest is None else latest))
        return np.fromstring(ids, dtype=np.int64, sep=",") if ids else np.zeros(0, np.int64)

    def rows(self, ids: list[int]) -> list[tuple[int, str, str]]:
        return self._read("SELECT id, source, target FROM pairs WHERE id IN "
                          f"({','.join('?' * len(ids))})", tuple(ids)) if ids else []

    def last_id(self) -> int:
        (last,), = self._read("SELECT max(id) FROM pairs")
        return last or 0

    def exact(self, text: str) -> list[tuple[int, str, str]]:
        return self._read("SELECT id, source, target FROM pairs WHERE key_hash = ?",
                          (key_hash(text),))

    def version(self) -> object:
        # data_version: another connection's commits; total_changes: this one's
        (data,), = self._read("PRAGMA data_version")
        return data, self.db.total_changes

    def pairs(self) -> Iterator[tuple[str, str]]:
        with damaged(self.path):
            yield from self.db.execute("SELECT source, target FROM pairs ORDER BY id")

    def info(self) -> dict:
        (count,), = self._read("SELECT count(*) FROM pairs")
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal"))
                   if p.exists())
        return self._about("sqlite", count, size)

    def integrity(self) -> str:
        """SQLite's own check of the file: "ok", or what is wrong."""
        return "; ".join(r[0] for r in self._read("PRAGMA integrity_check"))

    def close(self) -> None:
        self.db.close()
