"""Tokenizers' files as cache entries ($MT_CACHE_DIR/tokenizers/): trained on all of a config's
corpora, or a run's own (--resume, --init-from); and the one place the cache makes tokenizers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path

from mt.config import DataConfig
from mt.corpus_formats import CorpusSource
from mt.textio import file_identity
from mt.token_cache.keys import cache_root, digests, short_hash, trained_tokenizer_settings
from mt.token_cache.locked_build import locked_build
from mt.tokenizers import Tokenizer, build_tokenizers, load_tokenizers, tokenizer_files


def make_tokenizers(d: DataConfig, directory: Path) -> tuple[Tokenizer, Tokenizer]:
    """The source and target tokenizers of `d`, their files (if any) in `directory`; worker
    processes call this for themselves."""
    return load_tokenizers(d, directory)


def tokenizer_dir(d: DataConfig, corpora: list[CorpusSource],
                  tok_files: Mapping[str, bytes] | None = None) -> Path | None:
    """Where the tokenizers' files are: None for a kind without files (spaCy); else an entry
    holding `tok_files` (a run's own, on --resume or --init-from), or the files trained on all
    the corpora, trained first when missing."""
    names = tokenizer_files(d)
    if not names:
        return None
    if tok_files is not None:
        entry = cache_root() / "tokenizers" / f"files.{short_hash(sorted(digests(tok_files)))}"

        def write(tmp: Path) -> None:
            for name in names:
                (tmp / name).write_bytes(tok_files[name])
    else:
        files = [file_identity(p) for c in corpora for p in c.paths]
        settings = trained_tokenizer_settings(d)
        entry = cache_root() / "tokenizers" / f"trained.{short_hash(settings)}.{short_hash(files)}"

        def write(tmp: Path) -> None:
            build_tokenizers(d, tmp, *(_Text(corpora, k) for k in (0, 1)))
    return locked_build(entry, write, lambda: entry if _complete(entry, names) else None)


def _complete(entry: Path, names: list[str]) -> bool:
    return all((entry / n).is_file() for n in names)


class _Text:
    """Side k of every corpus, as one text to train a tokenizer on."""

    def __init__(self, corpora: list[CorpusSource], k: int):
        self.corpora, self.k = corpora, k

    def __iter__(self) -> Iterator[str]:
        return itertools.chain.from_iterable(c.side(self.k) for c in self.corpora)

    def __str__(self) -> str:
        return " and ".join(str(c.paths[min(self.k, len(c.paths) - 1)]) for c in self.corpora)
