"""Tokenizers: one protocol, a registry of kinds, built from the config (docs/tokenization.md).

- `spacy` (the default): spaCy's rule-based tokenizers with joiner marks (spacy_words.py).
- `sentencepiece`: subword models trained on the training split (subword.py).
- `marian`: a Marian (OPUS-MT) model's SentencePiece models and vocab.json (marian.py).

A kind is one module holding its settings (a TokenizerSettings dataclass, with their checks)
and a `KIND` (a TokenizerKind), and one line in KINDS. `data.tokenizer` is a kind's name or a
mapping {kind: NAME, ...its settings}; config reads it with the kind's dataclass, so this
package sits below config and never imports it. A kind's module is imported only when a config
names it, and imports its library only when it makes tokenizers: a SentencePiece run never
imports spaCy.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

from mt.errors import ConfigError
from mt.textio import iter_lines

KINDS = {  # data.tokenizer's kind -> the module whose KIND makes that kind's tokenizers
    "spacy": "mt.tokenizers.spacy_words",
    "sentencepiece": "mt.tokenizers.subword",
    "marian": "mt.tokenizers.marian",
}
DEFAULT_KIND = "spacy"

# The old form, before data.tokenizer held its kind's settings: SentencePiece's settings as
# keys of data, data.<key>: (kind, its settings field, the default it had). Config still reads
# them (docs/configuration.md), and the token cache's key still spells them so, with these
# defaults in every config: its entries built before stay valid. New kinds add none.
FLAT_KEYS = {
    "spm_model_type": ("sentencepiece", "model_type", "unigram"),
    "vocab_size": ("sentencepiece", "vocab_size", 8000),
    "spm_max_sentences": ("sentencepiece", "max_sentences", 1000000),
    "spm_alpha": ("sentencepiece", "alpha", 0.0),
    "spm_nbest": ("sentencepiece", "nbest", -1),
    "spm_samples": ("sentencepiece", "samples", 8),
}


@dataclass
class TokenizerSettings:
    """data.tokenizer: what every kind's settings dataclass has. Each kind's module subclasses
    it with its own keys (and their defaults and checks)."""

    kind: str  # a name in KINDS; each subclass gives its own as the default
    # Settings that only sample segmentations of the training text (Sampling): a fine-tuned
    # run keeps its own, and a trained tokenizer's cache entry does not depend on them.
    SAMPLING: ClassVar[tuple[str, ...]] = ()

    def problems(self) -> Iterator[tuple[str, str]]:
        """(key, message) for each setting out of range: checked whenever a config loads."""
        return iter(())


def default_settings() -> TokenizerSettings:
    """The settings of a config that names no tokenizer."""
    return tokenizer_kind(DEFAULT_KIND).settings()


class DataSection(Protocol):
    """What the tokenizers read of the data section (mt.config.DataConfig, a layer above)."""

    src_lang: str
    tgt_lang: str
    lowercase: bool
    shared_vocab: bool
    tokenizer: TokenizerSettings


class Tokenizer(Protocol):
    """What train, eval and translate use: lines to tokens and tokens back to one line."""

    # SentencePiece: its pieces in id order (mt's Vocab is exactly this); spaCy: None (mt
    # counts the training tokens to build the Vocab).
    fixed_vocab: list[str] | None

    def tokenize(self, line: str) -> list[str]: ...

    def tokenize_many(self, lines: Iterable[str]) -> list[list[str]]: ...

    def detokenize(self, tokens: Sequence[str]) -> str: ...


@runtime_checkable
class Sampling(Protocol):
    """A tokenizer that also samples segmentations of the training text (subword
    regularization): the token cache keeps `samples` of them of each corpus, and epoch e
    trains on number e mod samples."""

    samples: int  # 0: sampling is off, the cache keeps tokenize_many's one segmentation

    def sample_many(self, lines: Iterable[str], seed: int) -> list[list[str]]:
        """A sampled segmentation of each line, the same for the same seed."""
        ...


def samples(tok: Tokenizer) -> int:
    """How many sampled segmentations the token cache keeps (0: none, tokenize)."""
    return tok.samples if isinstance(tok, Sampling) else 0


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
    files and nothing to check; `settings` and `load` every kind must give."""

    settings: type[TokenizerSettings]  # its data.tokenizer dataclass

    def load(self, d: DataSection, directory: Path, files: Mapping[str, bytes]
             ) -> tuple[Tokenizer, Tokenizer]:
        """The (source, target) tokenizers, from `files` (name -> content, as a one-file
        checkpoint carries them) where they hold a file, else from directory."""
        raise NotImplementedError

    def train(self, d: DataSection, dest_dir: Path, src: Text, tgt: Text) -> None:
        """Train whatever needs training on the training text; write it into dest_dir."""

    def files(self, d: DataSection) -> Sequence[str]:
        """Names of the files `train` writes and `load` reads."""
        return ()

    def cache_settings(self) -> dict[str, str]:
        """What the token cache key adds for this kind: its library's version, since its rules
        (or its trainer) may change the tokens."""
        return {}

    def info(self, d: DataSection) -> dict:
        """What `mt info --json` shows of this kind beyond kind, languages and lowercasing."""
        return {}

    def describe(self, info: dict) -> str:
        """What `mt info` adds in brackets after the kind and languages, from info()."""
        return ""

    def check(self, d: DataSection) -> Iterator[tuple[str, str]]:
        """(key, message) for each data setting this kind cannot work with, checked only when
        a command is about to make its tokenizers (config_problems): spaCy's languages."""
        return iter(())


def tokenizer_kind(name: str) -> TokenizerKind:
    """The registered kind `name` (data.tokenizer's kind), its module imported on first use."""
    if name not in KINDS:
        raise ConfigError(f"data.tokenizer must be one of {', '.join(KINDS)}, got {name!r}")
    return importlib.import_module(KINDS[name]).KIND


def build_tokenizers(data_cfg: DataSection, dest_dir: Path, src: Text | Path, tgt: Text | Path
                     ) -> tuple[Tokenizer, Tokenizer]:
    """Tokenizers for a fresh run: trains what needs training (SentencePiece, on the training
    text only: files, or Text) and writes its files into dest_dir;
    `load_tokenizers(data_cfg, dest_dir)` loads them again."""
    src, tgt = (FileText(t) if isinstance(t, (str, Path)) else t for t in (src, tgt))
    tokenizer_kind(data_cfg.tokenizer.kind).train(data_cfg, Path(dest_dir), src, tgt)
    return load_tokenizers(data_cfg, dest_dir)


def load_tokenizers(data_cfg: DataSection, directory: Path,
                    files: Mapping[str, bytes] | None = None) -> tuple[Tokenizer, Tokenizer]:
    """The (source, target) tokenizers of a run directory, or of `files` (name -> content, as a
    one-file checkpoint carries them); a missing or damaged model file is a CheckpointError."""
    return tokenizer_kind(data_cfg.tokenizer.kind).load(data_cfg, Path(directory), files or {})


def tokenizer_files(data_cfg: DataSection) -> list[str]:
    """Names of the files a run's tokenizers need (written by build_tokenizers)."""
    return sorted(set(tokenizer_kind(data_cfg.tokenizer.kind).files(data_cfg)))


class _HasData(Protocol):
    data: DataSection


def config_problems(cfg: _HasData) -> Iterator[tuple[str, str]]:
    """The config's data settings its tokenizer kind cannot work with, as (key, message): a
    check for `load_config(..., checks=[config_problems])`, so a command that will make the
    tokenizers refuses them before any work."""
    return tokenizer_kind(cfg.data.tokenizer.kind).check(cfg.data)
