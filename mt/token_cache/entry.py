"""Reading one complete entry of the token cache: its meta data and vocabularies, its arrays
memory-mapped, and the check that they can be trained on."""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mt import log
from mt.data import ParallelData, TokenArray
from mt.errors import MTError
from mt.vocab import Vocab

META = "meta.json"  # written last: an entry without it is incomplete
SIDES = ("src", "tgt")


@dataclass
class CacheEntry:
    """A complete entry of one corpus: its directory, meta data and vocabularies."""

    path: Path
    meta: dict
    src_vocab: Vocab
    tgt_vocab: Vocab

    @classmethod
    def open(cls, path: Path) -> CacheEntry:
        """The entry at `path` as it was written: meta data and vocabularies read, nothing
        mapped or checked yet (check() does that). OSError, ValueError or KeyError when
        meta.json or a vocabulary is missing or unreadable."""
        meta = json.loads((path / META).read_text(encoding="utf-8"))
        return cls(path, meta, *(Vocab.load(path / f"vocab.{s}.txt") for s in SIDES))

    @property
    def vocabs(self) -> tuple[Vocab, Vocab]:
        return self.src_vocab, self.tgt_vocab

    @property
    def variants(self) -> int:
        """Segmentations of the corpus (a Sampling tokenizer's `samples`, else 1)."""
        return self.meta.get("variants", 1)

    def counts(self, side: str) -> collections.Counter:
        """How often each token of the side's vocabulary occurs in the corpus."""
        vocab = self.src_vocab if side == "src" else self.tgt_vocab
        counts = np.load(self.path / f"counts.{side}.npy")
        return collections.Counter(dict(zip(vocab.itos, counts.tolist())))

    def check(self) -> None:
        """ValueError unless each side's arrays match meta.json and can be trained on.

        Ids a damaged file holds would index past the vocabulary, and offsets out of order would
        cut pairs of negative length: both are found here, on every load. A maximum rather than
        a checksum: it is what the lookup needs, and a single pass at memory speed over pages
        the first epoch reads anyway (see benchmarks/bench_cache_load.py)."""
        for v in range(self.variants):
            for side, vocab in zip(SIDES, self.vocabs):
                array = self._array(side, v)
                ids, offsets = array.ids, array.offsets
                if len(ids) and int(ids.max()) >= len(vocab):
                    raise ValueError(f"{side}.ids holds ids beyond its vocabulary of "
                                     f"{len(vocab)}")
                if (offsets[0] != 0 or offsets[-1] != len(ids)
                        or not (offsets[1:] >= offsets[:-1]).all()):
                    raise ValueError(f"{side}.offsets do not run in order from 0 to its token "
                                     "count")

    def data(self, variant: int = 0) -> ParallelData:
        """All pairs (of one segmentation), memory-mapped: pages are read when a batch needs
        them. Ids are the entry's own vocabulary's."""
        return ParallelData(*(self._array(side, variant) for side in SIDES))

    def _array(self, side: str, variant: int = 0) -> TokenArray:
        name = array_name(side, variant, self.variants)
        n_pairs, n_tokens = self.meta["pairs"], self.meta["tokens"][name]
        dtype = np.dtype(self.meta["dtype"][side])
        if ((self.path / f"{name}.ids").stat().st_size != n_tokens * dtype.itemsize
                or (self.path / f"{name}.offsets").stat().st_size != (n_pairs + 1) * 8):
            raise ValueError(f"{name} arrays do not match {META}")
        ids = (np.memmap(self.path / f"{name}.ids", dtype, mode="r", shape=(n_tokens,))
               if n_tokens else np.zeros(0, dtype))  # mmap refuses an empty file
        offsets = np.memmap(self.path / f"{name}.offsets", np.int64, mode="r",
                            shape=(n_pairs + 1,))
        return TokenArray(ids, offsets)


def array_name(side: str, variant: int, variants: int) -> str:
    """The arrays' file stem: src, or src.K for segmentation K of several."""
    return side if variants == 1 else f"{side}.{variant}"


def load_entry(entry: Path, rebuilding: bool = False) -> CacheEntry | None:
    """The entry if it is complete and intact; None if it is missing or damaged.

    rebuilding: warn that a damaged entry is about to be rebuilt. Only the builder, under the
    entry's lock, passes it: one rebuild is one warning, and a cache location that is no
    directory is only the builder's error (open_entry's first look is silent).
    """
    try:
        cache = CacheEntry.open(entry)
        cache.check()
    except (OSError, ValueError, KeyError, TypeError, MTError) as e:
        if rebuilding and entry.exists():
            what = "incomplete" if isinstance(e, FileNotFoundError) else f"damaged ({e})"
            log.warn(f"{entry}: token cache entry is {what}; rebuilding it")
        return None
    return cache
