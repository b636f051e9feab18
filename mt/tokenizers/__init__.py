"""Tokenizers: one protocol, two kinds, built from the config (docs/tokenization.md).

- `spacy` (the default): spaCy's rule-based tokenizers with joiner marks (spacy_words.py).
- `sentencepiece`: subword models trained on the training split (subword.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from mt.config import DataConfig


class Tokenizer(Protocol):
    """What train, eval and translate use: lines to tokens and tokens back to one line."""

    # SentencePiece: its pieces in id order (mt's Vocab is exactly this); spaCy: None (mt
    # counts the training tokens to build the Vocab).
    fixed_vocab: list[str] | None

    def tokenize(self, line: str) -> list[str]: ...

    def tokenize_many(self, lines: Iterable[str]) -> list[list[str]]: ...

    def detokenize(self, tokens: Sequence[str]) -> str: ...


def build_tokenizers(data_cfg: DataConfig, dest_dir: Path, train_src_path: Path,
                     train_tgt_path: Path) -> tuple[Tokenizer, Tokenizer]:
    """Tokenizers for a fresh run: trains what needs training (SentencePiece, on the training
    split only) and writes its files into dest_dir; `load_tokenizers(data_cfg, dest_dir)`
    loads them again."""
    if data_cfg.tokenizer == "sentencepiece":
        from mt.tokenizers import subword

        subword.train_models(data_cfg, Path(dest_dir), Path(train_src_path), Path(train_tgt_path))
    return load_tokenizers(data_cfg, dest_dir)


def load_tokenizers(data_cfg: DataConfig, directory: Path,
                    files: Mapping[str, bytes] | None = None) -> tuple[Tokenizer, Tokenizer]:
    """The (source, target) tokenizers of a run directory, or of `files` (name -> content, as a
    one-file checkpoint carries them); a missing or damaged model file is a CheckpointError."""
    if data_cfg.tokenizer == "sentencepiece":
        from mt.tokenizers import subword

        return subword.load_models(data_cfg, Path(directory), files or {})
    from mt.tokenizers.spacy_words import SpacyTokenizer

    return (SpacyTokenizer(data_cfg.src_lang, data_cfg.lowercase),
            SpacyTokenizer(data_cfg.tgt_lang, data_cfg.lowercase))


def tokenizer_files(data_cfg: DataConfig) -> list[str]:
    """Names of the files a run's tokenizers need (written by build_tokenizers)."""
    if data_cfg.tokenizer == "sentencepiece":
        from mt.tokenizers import subword

        return sorted(set(subword.model_files(data_cfg)))
    return []
