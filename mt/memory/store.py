"""What every memory store does, whatever holds it (SQLite, PostgreSQL): `Memory`.

A store keeps pairs (each (source, target) once, in the order last added), its language pair,
and an index of its sources' words (the keys of mt.memory.match). It answers three questions:
how often each word occurs (`frequencies`), which pairs hold a word (`ids_holding`), and which
pairs have a given key (`exact`). Retrieval is written once, here: the query's rarest words
pick the candidates, those holding the most of them by weight (each word's idf), and
mt.memory.match scores them.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone

import numpy as np

from mt.errors import DataError
from mt.memory.match import Match, key, rank, terms

CANDIDATES = 100  # pairs scored per query: those holding most of its rarest words
# The rarest words of a query are searched until the pairs holding them pass this many: common
# words ("a", "the") would make every pair a candidate and the lookup as slow as a scan.
WORD_BUDGET = 3000
# A query whose rarest word is held by more pairs than that (all its words common): its
# COMMON_WORDS rarest, each in its latest WORD_BUDGET pairs (pairs holding all its words,
# ranked by bm25, were 20-100 ms a lookup at a million pairs, and none for most such queries)
COMMON_WORDS = 4
BATCH = 1000  # pairs a transaction when adding many: each batch is durable once committed
# best()'s answers kept while the memory is unchanged: a PO msgid looked up whole, then as its
# sentence, and a file's repeated lines ("OK", "Cancel") are searched once
MEMO = 10_000
VERSION = "1"  # the layout of a memory's tables
# How matches are found (candidates and score): data.memory's cached training matches name it,
# so that a change computes them again
RETRIEVAL = 3


def pair_hash(source: str, target: str) -> bytes:
    """What makes a pair a duplicate: both texts exactly (16 bytes, stored in place of a unique
    index over the texts themselves)."""
    return hashlib.blake2b(f"{source}\0{target}".encode("utf-8", "surrogatepass"),
                           digest_size=16).digest()


def key_hash(text: str) -> int:
    """The exact-match index's entry for a text: its key's hash as a signed 64-bit integer."""
    digest = hashlib.blake2b(key(text).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def most_weight(postings: list[np.ndarray], weights: list[float], n: int) -> list[int]:
    """The n ids whose postings weigh most (the sum of the weights of the lists holding each),
    the latest (highest id) first among equals."""
    ids = np.concatenate(postings)
    if not len(ids):
        return []
    unique, where = np.unique(ids, return_inverse=True)
    weight = np.bincount(where, np.repeat(weights, [len(p) for p in postings]))
    return unique[np.lexsort((-unique, -weight))[:n]].tolist()


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Memory:
    """A translation memory: pairs of one language pair, searched by fuzzy match."""

    name: str  # its path or URL (without a password), for messages
    langs: tuple[str, str]  # (source, target) language codes, recorded at creation
    created: str  # when, ISO 8601 in UTC

    # -- what a store provides --
    def _insert(self, pairs: list[tuple[str, str]]) -> int:
        """Add pairs in one transaction, one already there made the latest (an id after every
        other's: of equal scores the latest wins); how many were new."""
        raise NotImplementedError

    def frequencies(self, words: list[str]) -> dict[str, int]:
        """How many pairs' sources hold each word (of match.terms); absent words: 0 or none."""
        raise NotImplementedError

    def ids_holding(self, word: str, latest: int | None = None) -> np.ndarray:
        """The ids (int64) of the pairs whose sources hold word (of match.terms); the highest
        `latest` of them if given."""
        raise NotImplementedError

    def rows(self, ids: list[int]) -> list[tuple[int, str, str]]:
        """The pairs (id, source, target) with these ids, in any order."""
        raise NotImplementedError

    def last_id(self) -> int:
        """The highest id: the pairs ever added or added again (0 when empty), the N of idf."""
        raise NotImplementedError

    def exact(self, text: str) -> list[tuple[int, str, str]]:
        """The pairs whose source has text's key (a hash match: the score decides)."""
        raise NotImplementedError

    def pairs(self) -> Iterator[tuple[str, str]]:
        """Every pair, in the order last added."""
        raise NotImplementedError

    def version(self) -> object:
        """What changes whenever the memory does (a pair added through this connection or
        any other), for best()'s answers; None where the store cannot tell cheaply (best()
        then keeps none)."""
        return None

    def info(self) -> dict:
        """What `mt memory info` shows: its name, store, pairs, src, tgt, created, bytes."""
        raise NotImplementedError

    def _about(self, store: str, pairs: int, size: int) -> dict:
        return {"memory": self.name, "store": store, "pairs": pairs, "src": self.langs[0],
                "tgt": self.langs[1], "created": self.created, "bytes": size}

    def close(self) -> None:
        pass

    # -- written once for every store --
    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def check_langs(self, src: str | None, tgt: str | None, what: str = "these pairs") -> None:
        """A DataError when src/tgt (None: not said) are not the memory's pair."""
        if (src or self.langs[0], tgt or self.langs[1]) != self.langs:
            raise DataError(f"{self.name}: a {'-'.join(self.langs)} memory; {what} are "
                            f"{src or self.langs[0]}-{tgt or self.langs[1]}: use a memory of "
                            "that pair")

    def add(self, pairs: Iterable[tuple[str, str]], progress: Callable[[int], None] | None = None
            ) -> tuple[int, int]:
        """Add pairs in transactions of BATCH; (added, duplicates). A duplicate, a pair held
        already, is kept once and made the latest, as a new one would be (a correction that puts
        back an earlier translation wins again). A pair is durable once its batch is committed,
        and progress (if given) is called with each batch's size then."""
        added = seen = 0
        it = iter(pairs)
        while batch := list(itertools.islice(it, BATCH)):
            added, seen = added + self._insert(batch), seen + len(batch)
            progress and progress(len(batch))
        return added, seen - added

    def candidates(self, text: str, n: int = CANDIDATES) -> list[tuple[int, str, str]]:
        """The pairs worth scoring for text: its exact matches, and the n holding most of its
        rarest words by weight (of its few rarest, in their latest pairs, when even the rarest
        is common)."""
        found = {row[0]: row for row in self.exact(text)}
        df = {w: c for w, c in self.frequencies(terms(text)).items() if c}
        if df:
            by_rarity = sorted(df, key=df.get)
            rare, total = [], 0
            for word in by_rarity:
                if rare and total + df[word] > WORD_BUDGET:
                    break
                rare.append(word)
                total += df[word]
            latest = None
            if total > WORD_BUDGET:  # even the rarest is common
                rare, latest = by_rarity[:COMMON_WORDS], WORD_BUDGET
            n_pairs = max(self.last_id(), *df.values())
            rows = self.rows(most_weight([self.ids_holding(w, latest) for w in rare],
                                         [math.log(1 + n_pairs / df[w]) for w in rare], n))
            for row in rows:
                found.setdefault(row[0], row)
        return list(found.values())

    def search(self, text: str, k: int = 5, threshold: float = 0.0) -> list[Match]:
        """The k best matches for text scoring at least threshold, best first."""
        return rank(text, self.candidates(text), k, threshold)

    _memo: dict[tuple[str, float], Match | None] | None = None
    _memo_version: object = None

    def best(self, text: str, threshold: float = 0.0) -> Match | None:
        """text's best match scoring at least threshold; None where there is none, and for a
        blank text. The last MEMO texts' answers are kept while version() is unchanged."""
        if not text.strip():
            return None
        version = self.version()  # None: nothing kept from one call to the next
        if version is None or version != self._memo_version or len(self._memo or ()) >= MEMO:
            self._memo, self._memo_version = {}, version
        if (text, threshold) not in self._memo:
            self._memo[text, threshold] = next(iter(self.search(text, 1, threshold)), None)
        return self._memo[text, threshold]
