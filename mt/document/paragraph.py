"""One paragraph through the model: its sentences (mt.document.segment), each without its
placeholders (mt.document.placeholders), translated together, then put back into one text with
the whitespace between them as it was and the placeholders and inline tags where the word
alignment puts them (mt.document.placement)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mt.config import PLACEHOLDERS
from mt.document.placeholders import find, mask
from mt.document.placement import Anchor, Element, Layout, Leaf, Source, place, render
from mt.document.segment import split
from mt.memory.match import Match
from mt.records import Translation


@dataclass(frozen=True)
class Settings:
    """How paragraphs are read: the source language (its sentence splitter), whether a line
    break ends a sentence (plain text: yes; HTML: no), whether a sentence is too long for the
    model, the user's --keep patterns, how translated text is escaped (HTML), whether a
    word begins a sentence after another (the run's sentence starters), and the placeholder
    kinds taken out of the sentences (decode.mask). What a format that records the
    translation needs: the target language, whether what is translated already is translated
    again (decode.overwrite), and the translation's origin (the run), as PO files write it;
    reuse, a translation memory's match for a text whose target is used as it is (decode.memory
    with memory_exact reuse, at or above memory_reuse; None: no memory), for formats whose
    entries take it whole (PO, XLIFF).
    """

    lang: str
    lines: bool = True
    too_long: Callable[[str], bool] | None = None
    keep: Sequence[re.Pattern] = ()
    escape: Callable[[str], str] = str
    begins: Callable[[str], bool] | None = None
    masked: Sequence[str] = PLACEHOLDERS
    target: str = ""
    overwrite: bool = False
    origin: str = ""
    reuse: Callable[[str], Match | None] | None = None


class Paragraph:
    """A paragraph's text (and its inline markup, root) made ready: `inputs`, its sentences as
    the model translates them; `render` puts their translations together."""

    def __init__(self, text: str, settings: Settings, root: Element | None = None,
                 spans: Sequence[tuple[int, int]] = ()):
        """spans: what the format keeps whole in text besides the placeholders settings
        mask (a PO entry's format directives)."""
        self.text, self.escape = text, settings.escape
        spans = find(text, settings.keep, settings.masked, spans)
        self.sentences = split(text, settings.lang, settings.lines, settings.too_long, spans,
                               settings.begins)
        found = [[(a - s.start, b - s.start) for a, b in spans if s.start <= a < s.end]
                 for s in self.sentences]
        masked = [mask(text[s.start:s.end], spans) for s, spans in zip(self.sentences, found)]
        self.source = Source(self.sentences, masked)
        self.root = root or Element(0, len(text))
        _anchor(self.root, self.source, text)
        for k, (s, spans, m) in enumerate(zip(self.sentences, found, masked)):
            for (a, _), p in zip(spans, m.points):
                _adopt(self.root, Leaf(s.start + a, settings.escape(p.text),
                                       self.source.masked_anchor(k, p.at), p.space_before,
                                       p.space_after))
        self.inputs = [m.text for m in masked]
        self.written = [text[s.start:s.end] for s in self.sentences]  # placeholders in
        self.marked = bool(self.root.children)  # placed by the alignment
        # the sentences whose word alignment places something (the others need none)
        self.aligned = [False] * len(self.inputs)
        _aligned(self.root, self.source, self.aligned)
        self.cut = sum(s.cut for s in self.sentences)

    def render(self, translations: Sequence[Translation]) -> str:
        """The translated paragraph, from one translation per input (with its alignment when
        marked; without, the words are taken to follow in order)."""
        words = [t.text.split() for t in translations]
        links = [_links(t.alignment, len(self.source.words[k]), len(words[k]))
                 for k, t in enumerate(translations)]
        layout = Layout(words, links)
        bounds = [0] + [x for s in self.sentences for x in (s.start, s.end)] + [len(self.text)]
        gaps = [self.escape(self.text[a:b]) for a, b in zip(bounds[::2], bounds[1::2])]
        return render(layout, gaps, place(self.root, self.source, layout), self.escape)


def _anchor(node: Element, source: Source, text: str) -> None:
    """Give the markup's leaves their anchors, now that the sentences are known, and the
    spaces they had around them."""
    for child in node.children:
        if isinstance(child, Leaf):
            child.anchor = source.anchor(child.at)
            if child.space_before is None:
                child.space_before = child.at > 0 and text[child.at - 1].isspace()
            if child.space_after is None:
                child.space_after = child.at < len(text) and text[child.at].isspace()
        else:
            _anchor(child, source, text)


def _aligned(node: Element, source: Source, aligned: list[bool]) -> None:
    """Mark the sentences whose words anchor a leaf or are enclosed by an element: where the
    alignment is read. At a sentence's start or end, nothing needs it."""
    for child in node.children:
        anchors = [child.anchor] if isinstance(child, Leaf) else [source.anchor(child.start)]
        if isinstance(child, Element):
            anchors += [Anchor("core", k, w) for k, w in source.covered(child.start,
                                                                       child.end)[0]]
            _aligned(child, source, aligned)
        for a in anchors:
            if a.kind in ("core", "after"):
                aligned[a.sentence] = True


def _adopt(node: Element, leaf: Leaf) -> None:
    """Put a placeholder among the children of the innermost element around it, in order."""
    for child in node.children:
        if isinstance(child, Element) and child.start <= leaf.at < child.end:
            return _adopt(child, leaf)
    node.children.append(leaf)
    node.children.sort(key=lambda c: c.at)  # stable: the markup's order among equals


def _links(alignment: str | None, n_src: int, n_tgt: int) -> list[int]:
    """The source word of each target word: from Pharaoh pairs, or (none given: an engine
    without alignments) the diagonal."""
    if alignment is None:
        return [round(j * (n_src - 1) / max(1, n_tgt - 1)) if n_src else -1
                for j in range(n_tgt)]
    links = [-1] * n_tgt
    for pair in alignment.split():
        i, j = map(int, pair.split("-"))
        if j < n_tgt:
            links[j] = min(i, n_src - 1)
    return links
