"""Putting back what was taken out of a paragraph (placeholders, inline tags) where the word
alignment says, so that the result is well-formed: every tag once, properly nested.

The source side is a paragraph's sentences as the model saw them (placeholders taken out),
split at whitespace into words, as mt.decoding.align numbers them. An Anchor says where
something was among those words; a translated sentence is laid out as a row of positions (its
start, before, inside and after each word, its end), and the anchor's position is found through
the target words aligned to its source word. An element's tags go around the target words
aligned to the source words it enclosed, kept inside its parent's and off its siblings' (in
whatever order the translation puts them): tags never cross (docs/documents.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from mt.document.placeholders import Masked
from mt.document.segment import LINE_BREAK, Sentence, width

WORD = re.compile(r"\S+")
PUNCT = re.compile(r"(\W*)(.*?)(\W*)", re.S)  # a word's leading punctuation, core, trailing


@dataclass(frozen=True)
class Anchor:
    kind: str  # "start"/"end" of the sentence, or "core"/"after": after the word (its core)
    sentence: int
    word: int = -1  # in the sentence, from 0


@dataclass
class Leaf:
    """Something put in at one place: a placeholder, a void tag, a kept element."""

    at: int  # offset in the paragraph's text
    text: str
    anchor: Anchor
    # separate it from the words around it (as in the source); None: as its text says
    space_before: bool | None = None
    space_after: bool | None = None


@dataclass
class Element:
    """Inline tags around [start, end) of the paragraph's text; children in source order."""

    start: int
    end: int
    open: str = ""
    close: str = ""
    children: list[Element | Leaf] = field(default_factory=list)

    @property
    def at(self) -> int:
        return self.start


@dataclass
class Source:
    """A paragraph's sentences as translated: where each is in the text, and its words."""

    sentences: list[Sentence]
    masked: list[Masked]

    def __post_init__(self):
        self.words = [[m.span() for m in WORD.finditer(x.text)] for x in self.masked]

    def anchor(self, at: int) -> Anchor:
        """Where offset `at` of the paragraph's text is among the sentences' words."""
        for k, s in enumerate(self.sentences):
            if at == s.end:
                return Anchor("end", k)
            if at < s.end:
                return Anchor("start", k) if at <= s.start else self.masked_anchor(
                    k, self.masked[k].offset(at - s.start))
        return Anchor("end", len(self.sentences) - 1)

    def masked_anchor(self, k: int, at: int) -> Anchor:
        """Where offset `at` of sentence k's masked text is: after the word that starts before
        it (before its trailing punctuation, unless `at` is after that), else the sentence's
        start."""
        before = [w for w, (a, _) in enumerate(self.words[k]) if a < at]
        if not before:
            return Anchor("start", k)
        w = before[-1]
        a, b = self.words[k][w]
        # after a word's trailing punctuation only if it was after it in the source: a target
        # word's own (`hat.` for `has`) stays after what is put back
        punct = PUNCT.fullmatch(self.masked[k].text[a:b]).group(3)
        return Anchor("after" if at >= b and punct else "core", k, w)

    def covered(self, start: int, end: int) -> tuple[list[tuple[int, int]], bool, bool]:
        """The words (sentence, word) that [start, end) of the text overlaps, whether it
        begins at the first one's start and whether it ends at the last one's end."""
        found, first, last = [], True, True
        for k, s in enumerate(self.sentences):
            if start >= s.end or end <= s.start:
                continue
            a = self.masked[k].offset(max(start, s.start) - s.start)
            b = self.masked[k].offset(min(end, s.end) - s.start)
            for w, (x, y) in enumerate(self.words[k]):
                if x < b and y > a:
                    if not found:
                        first = a <= x
                    found.append((k, w))
                    last = b >= y
        return found, first, last


class Layout:
    """The translated sentences as a row of numbered positions: per sentence its start, per
    word before it, before and after its core (the word without leading and trailing
    punctuation), after it; the sentence's end. links[k][j]: the source word that target word
    j of sentence k is aligned to (-1: none)."""

    def __init__(self, words: list[list[str]], links: list[list[int]]):
        self.words, self.links, self.base = words, links, []
        n = 0
        for ws in words:
            self.base.append(n)
            n += 2 + 4 * len(ws)
        self.size = n

    def start(self, k: int) -> int:
        return self.base[k]

    def end(self, k: int) -> int:
        return self.base[k] + 1 + 4 * len(self.words[k])

    def slot(self, k: int, j: int, part: int) -> int:
        """part 0: before word j; 1: before its core; 2: after its core; 3: after it."""
        return self.base[k] + 1 + 4 * j + part

    def aligned(self, k: int, w: int) -> list[int]:
        return [j for j, i in enumerate(self.links[k]) if i == w]

    def position(self, anchor: Anchor) -> tuple[int, str]:
        """An anchor's position, and its kind ("start", "end" or "word")."""
        k = anchor.sentence
        if anchor.kind == "start":
            return self.start(k), "start"
        if anchor.kind == "end":
            return self.end(k), "end"
        for w in range(anchor.word, -1, -1):  # the word, else the nearest before it aligned
            js = self.aligned(k, w)
            if js:
                return self.slot(k, max(js), 2 if anchor.kind == "core" else 3), "word"
        return self.start(k), "start"

    def span(self, words: list[tuple[int, int]], first: bool, last: bool) -> tuple[int, int]:
        """The positions around the target words aligned to these source words (first: from
        before the first one's leading punctuation; last: to after the last one's trailing
        punctuation); (-1, -1) when none is aligned to them."""
        js = [(k, j) for k, w in words for j in self.aligned(k, w)]
        if not js:
            return -1, -1
        return self.slot(*min(js), 0 if first else 1), self.slot(*max(js), 3 if last else 2)


def spaced(leaf: Leaf, kind: str, empty: bool) -> str:
    """A leaf's text with the spaces that separate it from the translation's words."""
    before = leaf.space_before and kind in ("word", "end") and not empty
    after = leaf.space_after and kind == "start" and not empty
    return " " * before + leaf.text + " " * after


def place(root: Element, source: Source, layout: Layout) -> list[tuple[int, str]]:
    """What goes where: (position, text), in the order written at a position. An element is
    kept within its parent's positions and off its siblings' (in the translation's order,
    which may not be the source's); one aligned to nothing is an empty element where its
    start was."""
    out: list[tuple[int, str]] = []

    def visit(node: Element, lo: int, hi: int) -> None:
        leaves, spans = [], []
        for i, child in enumerate(node.children):
            if isinstance(child, Leaf):
                pos, kind = layout.position(child.anchor)
                empty = not layout.words[child.anchor.sentence]
                leaves.append((min(max(pos, lo), hi), i, spaced(child, kind, empty)))
                continue
            a, b = layout.span(*source.covered(child.start, child.end))
            if a < 0:
                a = b = layout.position(source.anchor(child.start))[0]
            spans.append((min(max(a, lo), hi), min(max(b, lo), hi), i, child))
        cursor, placed = lo, []
        for a, b, i, child in sorted(spans, key=lambda s: s[:3]):
            a = min(max(a, cursor), hi)
            placed.append((a, i, (max(b, a), child)))
            cursor = max(b, a)
        # at one position, what came first in the source is written first
        for pos, _, item in sorted(leaves + placed, key=lambda x: x[:2]):
            if isinstance(item, str):
                out.append((pos, item))
                continue
            b, child = item
            out.append((pos, child.open))
            visit(child, pos, b)
            out.append((b, child.close))

    visit(root, 0, layout.size)
    return out


def render(layout: Layout, gaps: list[str], inserts: list[tuple[int, str]],
           escape: Callable[[str], str], columns: dict[int, int] | None = None) -> str:
    """The translated paragraph: gaps[k] before sentence k (gaps[-1] after the last), the
    sentences' words (escaped) joined by spaces, and the inserts at their positions. A
    sentence k in columns starts at that column of its line, after two spaces at least."""
    at: dict[int, list[str]] = {}
    for pos, text in sorted(inserts, key=lambda x: x[0]):  # stable: in the order written
        at.setdefault(pos, []).append(text)

    def put(pos: int) -> str:
        return "".join(at.get(pos, ()))

    out = []
    for k, words in enumerate(layout.words):
        gap = gaps[k]
        if columns and k in columns:
            gap = " " * max(2, columns[k] - width(_last_line(out)))
        out += [gap, put(layout.start(k))]
        for j, word in enumerate(words):
            lead, core, trail = PUNCT.fullmatch(word).groups()
            parts = [" " if j else "", put(layout.slot(k, j, 0)), escape(lead),
                     put(layout.slot(k, j, 1)), escape(core), put(layout.slot(k, j, 2)),
                     escape(trail), put(layout.slot(k, j, 3))]
            out += parts
        out.append(put(layout.end(k)))
    out.append(gaps[-1])
    return "".join(out)


def _last_line(pieces: list[str]) -> str:
    """The text since the last line break of the pieces written so far (read back from the
    end only: a paragraph of a thousand --help lines is not joined again at each column)."""
    tail = []
    for piece in reversed(pieces):
        *before, last = LINE_BREAK.split(piece)
        tail.append(last)
        if before:
            break
    return "".join(reversed(tail))
