"""What the token cache's tests share: a small toy corpus, the entries in a cache directory, and
the training pairs as mt made them in memory before the cache, to compare with."""

from __future__ import annotations

from pathlib import Path

import torch

from conftest import TOY
from mt.cached_mix import mixed_data, run_vocabs
from mt.config import DataConfig
from mt.data import ParallelData, read_parallel
from mt.token_cache import CachedCorpora, open_cached_corpora
from mt.tokenizers.spacy_words import SpacyTokenizer
from mt.vocab import Vocab


def toy_data(tmp_path: Path, n: int = 400) -> DataConfig:
    """The first n toy training pairs (and 100 validation pairs), in a directory of their own."""
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for split, size in (("train", n), ("val", 100)):
        for lang in ("en", "de"):
            lines = (TOY / f"toy.{split}.{lang}").read_text(encoding="utf-8").splitlines()[:size]
            (data / f"toy.{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return DataConfig(dir=str(data))


def entries(cache_dir: Path) -> list[str]:
    """Everything in the cache but lock files: entries and temporary build directories."""
    tokens = cache_dir / "tokens"
    return sorted(p.name for p in tokens.iterdir() if not p.name.endswith(".lock"))


def in_memory(d: DataConfig) -> tuple[ParallelData, Vocab, Vocab]:
    """The training data as mt built it before the cache: all in one process, in memory."""
    src_lines, tgt_lines = read_parallel(Path(d.dir) / f"{d.train}.{d.src_lang}",
                                         Path(d.dir) / f"{d.train}.{d.tgt_lang}")
    src = SpacyTokenizer(d.src_lang, d.lowercase).tokenize_many(src_lines)
    tgt = SpacyTokenizer(d.tgt_lang, d.lowercase).tokenize_many(tgt_lines)
    if d.shared_vocab:
        src_vocab = tgt_vocab = Vocab.build(src + tgt, d.min_freq, d.max_size)
    else:
        src_vocab = Vocab.build(src, d.min_freq, d.max_size)
        tgt_vocab = Vocab.build(tgt, d.min_freq, d.max_size)
    data = ParallelData.from_lists([src_vocab.encode(t) for t in src],
                                   [tgt_vocab.encode(t) for t in tgt])
    return data, src_vocab, tgt_vocab


def open_cache(d: DataConfig, workers: int = 0) -> CachedCorpora:
    return open_cached_corpora(d, workers=workers)


def training(cached: CachedCorpora):
    """The training pairs a new run on `cached` trains on (ids in its counted vocabularies)."""
    return mixed_data(cached, *run_vocabs(cached))


def same_batches(a: ParallelData, b: ParallelData, max_tokens: int, seed: int) -> bool:
    one, two = a.batches(max_tokens, seed), b.batches(max_tokens, seed)
    return len(one) == len(two) and all(
        torch.equal(x.src, y.src) and torch.equal(x.tgt_in, y.tgt_in)
        and torch.equal(x.tgt_out, y.tgt_out) and x.n_tgt_tokens == y.n_tgt_tokens
        for x, y in zip(one, two))
