"""A memory in PostgreSQL, given a postgresql:// URL: one several servers share.

The same tables as the SQLite store (mt.memory.sqlite) in the database's own types: `pairs`
with each source's words as a `tsvector` (the 'simple' configuration: the words of
mt.memory.match, no stemming) under a GIN index; `vocab`, each word's document frequency,
updated in the same transaction (its rows locked in one order, so concurrent writers never
deadlock). A transaction per batch. A pair added again is moved to the latest id, as in
SQLite (`RETURNING xmax = 0` tells an inserted row, which no transaction has touched since,
from an updated one).
Needs psycopg 3: pip install 'mt[memory-pg]'.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from mt.errors import ConfigError, DataError
from mt.memory.match import terms
from mt.memory.store import VERSION, Memory, key_hash, now, pair_hash

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS mt_memory_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS mt_memory_pairs (id BIGSERIAL PRIMARY KEY, source TEXT NOT NULL,"
    " target TEXT NOT NULL, hash BYTEA NOT NULL UNIQUE, key_hash BIGINT NOT NULL,"
    " words TSVECTOR NOT NULL)",
    "CREATE INDEX IF NOT EXISTS mt_memory_key ON mt_memory_pairs (key_hash)",
    "CREATE INDEX IF NOT EXISTS mt_memory_words ON mt_memory_pairs USING GIN (words)",
    "CREATE TABLE IF NOT EXISTS mt_memory_vocab (term TEXT PRIMARY KEY, df BIGINT NOT NULL)",
]


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise ConfigError("a memory in PostgreSQL needs psycopg: pip install 'mt[memory-pg]'"
                          ) from None
    return psycopg


def shown(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


def _lexeme(word: str) -> str:
    """A word as a tsquery's lexeme: quoted, so that punctuation in it is not an operator."""
    return "'" + word.replace("'", "''") + "'"


class PostgresMemory(Memory):
    def __init__(self, url: str, langs: tuple[str, str] | None = None):
        psycopg = _psycopg()
        self.name = shown(url)
        try:
            self.db = psycopg.connect(url, autocommit=False)
        except psycopg.Error as e:
            raise DataError(f"{self.name}: cannot connect ({' '.join(str(e).split())})"
                            ) from None
        with self._transaction() as cur:
            if langs is not None:
                # One creator at a time: CREATE ... IF NOT EXISTS races with itself.
                cur.execute("SELECT pg_advisory_xact_lock(7461)")
                for statement in SCHEMA:
                    cur.execute(statement)
                cur.executemany("INSERT INTO mt_memory_meta VALUES (%s, %s) ON CONFLICT DO "
                                "NOTHING", [("src", langs[0]), ("tgt", langs[1]),
                                            ("created", now()), ("version", VERSION)])
            cur.execute("SELECT to_regclass('mt_memory_meta')")
            if cur.fetchone()[0] is None:
                raise DataError(f"{self.name}: no memory in this database; make one with "
                                "mt memory add")
            cur.execute("SELECT name, value FROM mt_memory_meta")
            meta = dict(cur.fetchall())
        self.langs, self.created = (meta["src"], meta["tgt"]), meta["created"]

    @contextmanager
    def _transaction(self) -> Iterator:
        psycopg = _psycopg()
        try:
            with self.db.transaction(), self.db.cursor() as cur:
                yield cur
        except psycopg.Error as e:
            raise DataError(f"{self.name}: {' '.join(str(e).split())}") from None

    def _insert(self, pairs: list[tuple[str, str]]) -> int:
        added, counts = 0, {}
        with self._transaction() as cur:
            for source, target in pairs:
                words = terms(source)
                cur.execute("INSERT INTO mt_memory_pairs (source, target, hash, key_hash, words)"
                            " VALUES (%s, %s, %s, %s, to_tsvector('simple', %s)) "
                            # a pair held already takes the id just drawn: the latest
                            "ON CONFLICT (hash) DO UPDATE SET id = EXCLUDED.id "
                            "RETURNING xmax = 0",
                            (source, target, pair_hash(source, target), key_hash(source),
                             " ".join(words)))
                if cur.fetchone()[0]:
                    added += 1
                    for w in words:
                        counts[w] = counts.get(w, 0) + 1
            cur.executemany("INSERT INTO mt_memory_vocab VALUES (%s, %s) ON CONFLICT (term) "
                            "DO UPDATE SET df = mt_memory_vocab.df + EXCLUDED.df",
                            sorted(counts.items()))
        return added

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._transaction() as cur:
            cur.execute(sql, args)
            return cur.fetchall()

    def frequencies(self, words: list[str]) -> dict[str, int]:
        return dict(self._read("SELECT term, df FROM mt_memory_vocab WHERE term = ANY(%s)",
                               (words,))) if words else {}

    def ids_holding(self, word: str, latest: int | None = None) -> np.ndarray:
        return np.array([i for i, in self._read(
            "SELECT id FROM mt_memory_pairs WHERE words @@ to_tsquery('simple', %s) "
            "ORDER BY id DESC LIMIT %s", (_lexeme(word), latest))], dtype=np.int64)

    def rows(self, ids: list[int]) -> list[tuple[int, str, str]]:
        return self._read("SELECT id, source, target FROM mt_memory_pairs WHERE id = ANY(%s)",
                          (ids,)) if ids else []

    def last_id(self) -> int:
        (last,), = self._read("SELECT max(id) FROM mt_memory_pairs")
        return last or 0

    def exact(self, text: str) -> list[tuple[int, str, str]]:
        return self._read("SELECT id, source, target FROM mt_memory_pairs WHERE key_hash = %s",
                          (key_hash(text),))

    def pairs(self) -> Iterator[tuple[str, str]]:
        with self._transaction() as cur:
            cur.execute("SELECT source, target FROM mt_memory_pairs ORDER BY id")
            yield from cur

    def info(self) -> dict:
        (count, size), = self._read(
            "SELECT count(*), pg_total_relation_size('mt_memory_pairs') + "
            "pg_total_relation_size('mt_memory_vocab') FROM mt_memory_pairs")
        return self._about("postgresql", count, size)

    def close(self) -> None:
        self.db.close()
