"""Sentences of a paragraph: where each begins and ends in its text, so that the whitespace
between them is kept as it was and only the sentences are translated.

spaCy's rule-based `sentencizer` on `spacy.blank(lang)` splits after sentence-final punctuation
(docs/documents.md: why, and what it gets wrong); where the run learned its sentence starters
(mt.document.starters), a starter right after a word also begins a sentence, for sentences
without final punctuation. A line break always ends a sentence in plain
text (a title, a list item), not in HTML, where it is only whitespace; so does a column gap in
plain text, a tab or two spaces or more between two words of a line (`  -v, --verbose    verbose
mode`, a program's --help: each cell is translated alone, and the paragraph puts the next cell
back at its column). A sentence longer than
the model takes is cut at the clause boundary nearest its middle (a comma, semicolon, colon or
dash before a space), else at the space nearest its middle, until every piece fits; each piece
says it was cut.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

CLAUSE = re.compile(r"(?<=[,;:])\s+|\s+(?=[–—-]\s)")  # a cut goes where this whitespace is
SPACE = re.compile(r"\s+")
WORD_GAP = re.compile(r"(?<=\w)\s+(?=(\S+))")  # whitespace after a word, and the word after it
LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
COLUMN = re.compile(r"(?<=\S)(?:\t|  )[ \t]*(?=\S)")  # a column gap inside a line


@dataclass(frozen=True)
class Sentence:
    start: int  # characters of the text, [start, end): no whitespace at either end
    end: int
    cut: bool = False  # a piece of a sentence too long for the model


@functools.lru_cache(maxsize=8)
def sentencizer(lang: str):
    """spacy.blank(lang) with the sentencizer; "xx" (spaCy's multi-language) for a language
    spaCy does not know."""
    import spacy

    try:
        nlp = spacy.blank(lang)
    except (ImportError, KeyError, ValueError):  # spaCy raises ImportError for unknown codes
        nlp = spacy.blank("xx")
    nlp.add_pipe("sentencizer")
    nlp.max_length = 10**8  # its bound is for parsers' memory; the sentencizer needs little
    return nlp


def split(text: str, lang: str, lines: bool = True,
          too_long: Callable[[str], bool] | None = None,
          whole: Sequence[tuple[int, int]] = (),
          begins: Callable[[str], bool] | None = None) -> list[Sentence]:
    """The sentences of text, in order. lines: a line break ends a sentence, and so does a
    column gap. too_long: whether
    a sentence is longer than the model takes (then it is cut). whole: (start, end) spans no
    sentence boundary may fall in (a placeholder's: a boundary there moves to its start).
    begins: whether a word begins a sentence after another word without punctuation between
    (a sentence starter of the run's, mt.document.starters)."""
    starts: list[int] = []
    for a, b in _line_spans(text) if lines else [(0, len(text))]:
        if text[a:b].strip():
            starts += [a + s.start_char for s in sentencizer(lang)(text[a:b]).sents]
            starts += [m.end() for m in COLUMN.finditer(text, a, b)] if lines else []
            starts.append(b)
    starts = sorted({next((x for x, y in whole if x < start < y), start) for start in starts})
    if begins is not None:
        starts = sorted({*starts, *(m.end() for m in WORD_GAP.finditer(text) if begins(
            m.group(1)) and not any(x < m.end() < y for x, y in whole))})
    found = [s for a, b in zip(starts, starts[1:]) for s in _stripped(text, a, b)]
    if too_long is None:
        return found
    return [piece for s in found for piece in cut(text, s, too_long, whole)]


def columns(text: str, sentences: Sequence[Sentence]) -> dict[int, int]:
    """The column each sentence after a column gap of spaces starts at (display width since
    its line's start), by index: where its translation is put back. Not after a sentence's
    final punctuation, where two spaces are typing, not layout; a tab aligns by itself."""
    found, lines = {}, [0] + [m.end() for m in LINE_BREAK.finditer(text)]
    for k, s in enumerate(sentences[1:], 1):
        end = sentences[k - 1].end
        if len(text[end:s.start]) >= 2 and text[end:s.start].strip(" ") == "" \
                and text[end - 1] not in ".!?":
            found[k] = width(text[lines[bisect.bisect_right(lines, s.start) - 1]:s.start])
    return found


def width(text: str) -> int:
    """The columns a terminal gives text: two for a wide East Asian character, none for a
    combining mark."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF"
               else 1 for c in text)


def _line_spans(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in LINE_BREAK.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    return [*spans, (start, len(text))]


def _stripped(text: str, a: int, b: int) -> list[Sentence]:
    """[a, b) without whitespace at its ends; nothing for whitespace alone."""
    piece = text[a:b]
    if not piece.strip():
        return []
    a += len(piece) - len(piece.lstrip())
    b -= len(piece) - len(piece.rstrip())
    return [Sentence(a, b)]


def cut(text: str, s: Sentence, too_long: Callable[[str], bool],
        whole: Sequence[tuple[int, int]] = ()) -> list[Sentence]:
    """s as it is if it fits, else its pieces cut at clause boundaries (then spaces, then
    anywhere but in whole's spans), each of which fits."""
    if not too_long(text[s.start:s.end]) or s.end - s.start < 2:
        return [s]
    middle = (s.start + s.end) // 2
    inside = [(x, y) for x, y in whole if x < middle < y]
    at = inside[0][0] if inside and inside[0][0] > s.start else middle
    gaps = [[m.span() for m in pattern.finditer(text, s.start, s.end)
             if not any(x < m.start() < y for x, y in whole)] for pattern in (CLAUSE, SPACE)]
    a, b = min(gaps[0] or gaps[1], key=lambda g: abs(g[0] + g[1] - 2 * middle), default=(at, at))
    halves = _stripped(text, s.start, a) + _stripped(text, b, s.end)
    if len(halves) < 2:  # nowhere to cut
        return [Sentence(s.start, s.end, True)]
    return [p for h in halves for p in cut(text, Sentence(h.start, h.end, True), too_long, whole)]
