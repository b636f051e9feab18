"""spaCy rule-based tokenizers (`spacy.blank(lang)`, no model download) and Moses detokenization."""

from __future__ import annotations

from collections.abc import Iterable

import spacy
from sacremoses import MosesDetokenizer

from mt.errors import ConfigError


def has_tokenizer(lang: str) -> bool:
    """Whether spaCy has a rule-based tokenizer for this language code (as `spacy.blank` needs)."""
    try:
        spacy.util.get_lang_class(lang)
    except (ImportError, KeyError, ValueError):
        return False
    return True


class Tokenizer:
    """Splits a line into tokens and joins tokens back into text for one language."""

    def __init__(self, lang: str, lowercase: bool = False):
        try:
            self._nlp = spacy.blank(lang)
        except (ImportError, KeyError, ValueError):
            raise ConfigError(
                f"no spaCy tokenizer for language {lang!r}; use a spaCy language code "
                "such as en, de, fr, or xx (multi-language)"
            ) from None
        self.lang = lang
        self.lowercase = lowercase
        self._detok = MosesDetokenizer(lang=lang)

    def _prep(self, line: str) -> str:
        return line.lower() if self.lowercase else line

    def tokenize(self, line: str) -> list[str]:
        return [t.text for t in self._nlp.tokenizer(self._prep(line)) if not t.is_space]

    def tokenize_many(self, lines: Iterable[str]) -> list[list[str]]:
        docs = self._nlp.tokenizer.pipe(self._prep(line) for line in lines)
        return [[t.text for t in doc if not t.is_space] for doc in docs]

    def detokenize(self, tokens: list[str]) -> str:
        return self._detok.detokenize(tokens)
