"""Tokenizers: one protocol, a registry of kinds, built from the config (docs/tokenization.md).

- `spacy` (the default): spaCy's rule-based tokenizers with joiner marks (spacy_words.py).
- `sentencepiece`: subword models trained on the training split (subword.py).

A kind is one module holding a `KIND` (a TokenizerKind) and one line in KINDS; the module is
imported only when a config names its kind, so a SentencePiece run never imports spaCy.
config.TokenizerName lists the same names for config validation (config cannot import this).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from mt.errors import ConfigError
from mt.textio import iter_lines

if TYPE_CHECKING:
    from mt.config import Config, DataConfig

KINDS = {  # data.tokenizer -> the module whose KIND makes that kind's tokenizers
    "spacy": "mt.tokenizers.spacy_words",
    "sentencepiece": "mt.tokenizers.subword",
}


class Tokenizer(Protocol):
    """What train, eval and translate use: lines to tokens and tokens back to one line."""

    # SentencePiece: its pieces in id order (mt's Vocab is exactly this); spaCy: None (mt
    # counts the training tokens to build the Vocab).
    fixed_vocab: list[str] | None

    def tokenize(self, line: str) -> list[str]: ...

    def tokenize_many(self, lines: Iterable[str]) -> list[list[str]]: ...

    def detokenize(self, tokens: Sequence[str]) -> str: ...


class Text(Protocol):
    """What a tokenizer trains on: lines, iterable more than once; str() says where from."""

    def __iter__(self) -> Iterator[str]: ...


class FileText:
    """The lines of one file (plain or .gz)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def __iter__(self) -> Iterator[str]:
        return iter_lines(self.path, warn_invalid=False)

    def __str__(self) -> str:
        return str(self.path)


class TokenizerKind:
    """What the registry needs of a kind. The defaults suit a kind with nothing to train, no
    files and nothing to check; `load` every kind must give."""

    def load(self, d: DataConfig, directory: Path, files: Mapping[str, bytes]
             ) -> tuple[Tokenizer, Tokenizer]:
        """The (source, target) tokenizers, from `files` (name -> content, as a one-file
        checkpoint carries them) where they hold a file, else from directory."""
        raise NotImplementedError

    def train(self, d: DataConfig, dest_dir: Path, src: Text, tgt: Text) -> None:
        """Train whatever needs training on the training text; write it into dest_dir."""

    def files(self, d: DataConfig) -> Sequence[str]:
        """Names of the files `train` writes and `load` reads."""
        return ()

    def cache_settings(self) -> dict[str, str]:
        """What the token cache key adds for this kind: its library's version, since its rules
        (or its trainer) may change the tokens."""
        return {}

    def info(self, d: DataConfig) -> dict:
        """What `mt info` shows of this kind beyond kind, languages and lowercasing."""
        return {}

    def check(self, d: DataConfig) -> Iterator[tuple[str, str]]:
        """(key, message) for each data setting this kind cannot work with."""
        return iter(())


def tokenizer_kind(name: str) -> TokenizerKind:
    """The registered kind `name` (data.tokenizer), its module imported on first use."""
    if name not in KINDS:
        raise ConfigError(f"data.tokenizer must be one of {', '.join(KINDS)}, got {name!r}")
    return importlib.import_module(KINDS[name]).KIND


def build_tokenizers(data_cfg: DataConfig, dest_dir: Path, src: Text | Path, tgt: Text | Path
                     ) -> tuple[Tokenizer, Tokenizer]:
    """Tokenizers for a fresh run: trains what needs training (SentencePiece, on the training
    text only: files, or Text) and writes its files into dest_dir;
    `load_tokenizers(data_cfg, dest_dir)` loads them again."""
    src, tgt = (FileText(t) if isinstance(t, (str, Path)) else t for t in (src, tgt))
    tokenizer_kind(data_cfg.tokenizer).train(data_cfg, Path(dest_dir), src, tgt)
    return load_tokenizers(data_cfg, dest_dir)


def load_tokenizers(data_cfg: DataConfig, directory: Path,
                    files: Mapping[str, bytes] | None = None) -> tuple[Tokenizer, Tokenizer]:
    """The (source, target) tokenizers of a run directory, or of `files` (name -> content, as a
    one-file checkpoint carries them); a missing or damaged model file is a CheckpointError."""
    return tokenizer_kind(data_cfg.tokenizer).load(data_cfg, Path(directory), files or {})


def tokenizer_files(data_cfg: DataConfig) -> list[str]:
    """Names of the files a run's tokenizers need (written by build_tokenizers)."""
    return sorted(set(tokenizer_kind(data_cfg.tokenizer).files(data_cfg)))


def config_problems(cfg: Config) -> Iterator[tuple[str, str]]:
    """The config's tokenizer settings its kind cannot work with, as (key, message): a check
    for `load_config(..., checks=[config_problems])`, so a command that will make the
    tokenizers refuses them before any work."""
    return tokenizer_kind(cfg.data.tokenizer).check(cfg.data)
