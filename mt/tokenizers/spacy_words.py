"""spaCy's rule-based tokenizers (`spacy.blank(lang)`, no model download), made reversible with a
joiner mark: a token glued to its neighbour in the text (no whitespace between them) carries MARK
on that side, so `detokenize(tokenize(line)) == normalize(line)`.

spaCy is imported only when a spaCy tokenizer is made or its languages are checked: a
SentencePiece run never loads it.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mt.errors import ConfigError
from mt.tokenizers import DataSection, TokenizerKind, TokenizerSettings
from mt.tokenizers.text import MARK, escape, unescape

_BLOCK = 1000  # lines per spaCy Doc in SpacyTokenizer.tokenize_many
_NON_SPACE = re.compile(r"\S+")  # \S is exactly `not str.isspace()`, as `str.split()` uses


@dataclass
class SpacySettings(TokenizerSettings):
    """data.tokenizer: spacy. No settings of its own: the languages are data.src_lang and
    data.tgt_lang."""

    kind: str = "spacy"


class SpacyKind(TokenizerKind):
    """The `spacy` kind: nothing to train and no files; the languages must be spaCy's."""

    settings = SpacySettings

    def load(self, d: DataSection, directory: Path, files: Mapping[str, bytes]
             ) -> tuple[SpacyTokenizer, SpacyTokenizer]:
        return SpacyTokenizer(d.src_lang, d.lowercase), SpacyTokenizer(d.tgt_lang, d.lowercase)

    def cache_settings(self) -> dict[str, str]:
        import spacy

        return {"spacy": spacy.__version__}

    def check(self, d: DataSection) -> Iterator[tuple[str, str]]:
        for key, lang in (("data.src_lang", d.src_lang), ("data.tgt_lang", d.tgt_lang)):
            if not has_tokenizer(lang):
                yield key, f"{key}: {no_tokenizer(lang)}"


KIND = SpacyKind()


def has_tokenizer(lang: str) -> bool:
    """Whether spaCy has a rule-based tokenizer for this language code (as `spacy.blank` needs)."""
    import spacy

    try:
        spacy.util.get_lang_class(lang)
    except (ImportError, KeyError, ValueError):
        return False
    return True


def no_tokenizer(lang: str) -> str:
    return (f"no spaCy tokenizer for language {lang!r}; use a spaCy language code such as en, "
            "de, fr, or xx (multi-language)")


class SpacyTokenizer:
    """spaCy words with joiner marks, for one language.

    Where two tokens touch in the text, one of them carries MARK on the touching side: the one
    that is not a word there (punctuation, a bracket, a hyphen), so words keep one form:
    "(father-figure)." -> "(￭ father ￭-￭ figure ￭) ￭." A MARK or ESCAPE in the text itself is
    escaped (see `escape`), so every line comes back exactly, up to `normalize`.
    """

    fixed_vocab = None

    def __init__(self, lang: str, lowercase: bool = False):
        try:
            self._tokenizer = _blank(lang).tokenizer
        except (ImportError, KeyError, ValueError):
            raise ConfigError(no_tokenizer(lang)) from None
        self.lang = lang
        self.lowercase = lowercase

    def _prep(self, line: str) -> str:
        return line.lower() if self.lowercase else line

    def tokenize(self, line: str) -> list[str]:
        return self.tokenize_many([line])[0]

    def tokenize_many(self, lines: Iterable[str]) -> list[list[str]]:
        # One spaCy Doc per _BLOCK lines joined by newlines, not one per line: making a Doc
        # has a fixed cost, which short lines would each pay (benchmarks/bench_tokenize.py
        # times tokenizing). spaCy tokenizes each whitespace-separated span on its own, so the
        # tokens are the same as line by line.
        out: list[list[str]] = []
        it = iter(lines)
        while block := [self._prep(line) for line in itertools.islice(it, _BLOCK)]:
            out.extend(_mark(self._tokenizer("\n".join(block)), block))
        return out

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Tokens back into one line: a space between two tokens unless a MARK joins them.
        Works on any tokens (text that was never tokenized is joined with spaces)."""
        out: list[str] = []
        glue = False  # the previous token ended with MARK
        for tok in tokens:
            if not tok:
                continue
            left, right = tok.startswith(MARK), tok.endswith(MARK)
            if out and not (glue or left):
                out.append(" ")
            out.append(unescape(tok[left:len(tok) - right], MARK))
            glue = right
        return "".join(out)

    def token_words(self, tokens: Sequence[str]) -> list[int]:
        """mt.decoding.align.token_words for this detokenize, in one pass rather than one detokenize
        per prefix: the text grows by each token's piece, after a space or not."""
        out: list[int] = []
        words, started, glue, in_word = 0, False, False, False  # in_word: text ends a word
        for tok in tokens:
            if tok:
                left, right = tok.startswith(MARK), tok.endswith(MARK)
                piece = unescape(tok[left:len(tok) - right], MARK)
                space = started and not (glue or left)
                started, glue = True, right
                if parts := piece.split():
                    words += len(parts) - (in_word and not space and not piece[0].isspace())
                    in_word = not piece[-1].isspace()
                elif piece or space:
                    in_word = False
            out.append(max(0, words - 1))
        return out


@functools.lru_cache(maxsize=16)
def _blank(lang: str):
    # Making a blank pipeline costs tens of ms; a process makes one tokenizer per run loaded
    # and per side, often for the same language. Only its tokenizer is used, never mutated.
    import spacy

    return spacy.blank(lang)


def _mark(doc, lines: list[str]) -> list[list[str]]:
    """The marked tokens of each of `lines`, from a spaCy Doc of them joined by newlines.
    Pieces come from the character offsets (whitespace is never part of a token; a spaCy token
    holding some is split there), so each belongs to exactly one line."""
    ends = list(itertools.accumulate(len(line) + 1 for line in lines))  # past each newline
    pieces: list[list[tuple[str, int, int]]] = [[] for _ in lines]
    i = 0
    for t in doc:  # in text order, so the line index only moves forward
        for m in _NON_SPACE.finditer(t.text):
            start = t.idx + m.start()
            while start >= ends[i]:
                i += 1
            pieces[i].append((m.group(), start, t.idx + m.end()))
    return [_joined(p) for p in pieces]


def _joined(pieces: list[tuple[str, int, int]]) -> list[str]:
    """One line's pieces (text, start, end) as tokens, MARK where two of them touch."""
    tokens = [escape(text, MARK) for text, _, _ in pieces]
    for i in range(1, len(pieces)):
        (prev, _, prev_end), (cur, cur_start, _) = pieces[i - 1], pieces[i]
        if prev_end != cur_start:  # whitespace between them
            continue
        if cur[0].isalnum() and not prev[-1].isalnum():
            tokens[i - 1] += MARK  # "(￭ father": the bracket carries the mark
        else:
            tokens[i] = MARK + tokens[i]  # "father ￭-", "dogs ￭,", "ca ￭n't"
    return tokens
