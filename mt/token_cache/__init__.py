"""The token cache: each training corpus tokenized once, on every core, into memory-mapped arrays.

The first run on a corpus streams it in chunks through worker processes, counts its tokens and
writes the ids as flat arrays; later runs and resumes map those arrays and start at once.
docs/data.md is the user's side of this.

One entry per corpus, $MT_CACHE_DIR/tokens/<name>.<src>-<tgt>.<settings>.<paths>.<files>/ (hashes):
  meta.json                  what it was built from, counts, dtypes (written last)
  src.ids, tgt.ids           every pair's token ids back to back, in the entry's own
                             vocabulary: uint16, or uint32 beyond 65,536 entries
  src.offsets, tgt.offsets   int64: pair i is ids[offsets[i]:offsets[i + 1]]
  vocab.src.txt, vocab.tgt.txt, counts.src.npy, counts.tgt.npy
                             every token of the corpus, most frequent first, and its count
A Sampling tokenizer's `samples` sampled segmentations (SentencePiece's alpha > 0): src.K.ids,
src.K.offsets, ...
The settings hash covers everything that changes the ids (tokenizer settings and files,
lowercasing); the files hash covers the corpus's paths, sizes and modification times. A run's
vocabulary is counted from its corpora's counts, and each entry's ids are looked up in it as
batches are made (mt.cached_mix), so one corpus's entry serves every mix and vocabulary it is
used in.

Trained tokenizers (SentencePiece) are entries too, $MT_CACHE_DIR/tokenizers/<hash>/, trained
on all of a config's corpora. An entry is built in a hidden directory beside it under a lock
(<entry>.lock) and renamed into place when complete, so an interrupted build is never used.

The rooms: keys.py (what names an entry), entry.py (reading one), locked_build.py (the lock
and the rename), tokenizer_entries.py (the tokenizers' files), builder.py (tokenizing a corpus
into an entry); this module opens them all for a config.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mt.config import DataConfig
from mt.corpus_formats import CorpusSource
from mt.data import corpus_sources
from mt.token_cache.builder import open_entry
from mt.token_cache.entry import CacheEntry
from mt.token_cache.keys import entry_settings
from mt.token_cache.tokenizer_entries import make_tokenizers, tokenizer_dir
from mt.tokenizers import Tokenizer, tokenizer_files


@dataclass
class CachedCorpora:
    """A config's training corpora, in its order, with their cache entries and tokenizers."""

    sources: list[CorpusSource]
    entries: list[CacheEntry]  # entries[i] is sources[i]'s
    tok_dir: Path | None  # None: the kind has no files (spaCy)
    tok_files: dict[str, bytes]  # what checkpoints carry of the tokenizers (read once)
    data_cfg: DataConfig

    @functools.cached_property
    def _tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        return make_tokenizers(self.data_cfg, self.tok_dir or Path("."))

    def tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        """Made once: a new run's vocabularies and training both ask."""
        return self._tokenizers


def open_cached_corpora(d: DataConfig, tok_files: Mapping[str, bytes] | None = None,
                        workers: int = 0) -> CachedCorpora:
    """The token cache of each of d's training corpora, built first when missing or stale.

    tok_files: a run's own tokenizer files (--resume, --init-from), used instead of training.
    workers: tokenizer processes when building (0: one per available core).
    """
    sources = corpus_sources(d)
    tok_dir = tokenizer_dir(d, sources, tok_files)
    files = {n: (tok_dir / n).read_bytes() for n in tokenizer_files(d)} if tok_dir else {}
    settings = entry_settings(d, files)
    entries = [open_entry(d, c, tok_dir, settings, workers) for c in sources]
    return CachedCorpora(sources, entries, tok_dir, files, d)
