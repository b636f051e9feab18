"""One paragraph through the model: its sentences (mt.document.segment), each without its
placeholders (mt.document.placeholders), translated together, then put back into one text with
the whitespace between them as it was and the placeholders and inline tags where the word
alignment puts them (mt.document.placement)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from mt.config import PLACEHOLDERS
from mt.document.placeholders import KINDS, find, mask
from mt.document.placement import Anchor, Element, Layout, Leaf, Source, place, render
from mt.document.segment import columns, split
from mt.memory.match import Match
from mt.records import Translation

WORD = re.compile(r"\w")


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
    # a format's own directives (a PO entry's) left to the model, which writes them where they
    # go (a model of software strings has seen them), and taken out only from a paragraph
    # whose translation does not give each back (Paragraph.keeps): for a caller that
    # translates again what Documents.harden gives back (mt.document.translate_inputs does)
    soft: bool = False


class Paragraph:
    """A paragraph's text (and its inline markup, root) made ready: `inputs`, its sentences as
    the model translates them; `render` puts their translations together."""

    def __init__(self, text: str, settings: Settings, root: Element | None = None,
                 spans: Sequence[tuple[int, int]] = ()):
        """spans: what the format keeps whole in text besides the placeholders settings
        mask (a PO entry's format directives)."""
        self.text, self.escape = text, settings.escape
        given, every = spans, find(text, settings.keep, settings.masked, spans)
        self.sentences = split(text, settings.lang, settings.lines, settings.too_long, every,
                               settings.begins)
        left = {(a, b) for a, b in set(given) & set(every) if text[a:b].isprintable()
                } if settings.soft else set()  # a tab is the format's to keep
        # the placeholders left in each sentence, in order: its translation must give them back
        self.required = [[text[a:b] for a, b in every if (a, b) in left and s.start <= a < s.end]
                         for s in self.sentences]
        # what hardened() makes again with every placeholder taken out (the markup as given:
        # this one's gets the placeholders' leaves)
        self._again = None if not left else (text, replace(settings, soft=False),
                                             copy.deepcopy(root), given)
        found = [[(a - s.start, b - s.start) for a, b in every
                  if s.start <= a < s.end and (a, b) not in left] for s in self.sentences]
        # a sentence with no word left besides its placeholders (`-v, --verbose`: a comma)
        # has nothing to translate: it is kept whole, not given to the model as punctuation
        found = [[(0, s.end - s.start)] if at and not WORD.search(mask(text[s.start:s.end],
                                                                       at).text) else at
                 for s, at in zip(self.sentences, found)]
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
        self.columns = columns(text, self.sentences) if settings.lines else {}

    def keeps(self, translations: Sequence[Translation]) -> bool:
        """Whether each sentence's translation gives back the placeholders left in it, each
        as often and in the same order, and writes no template variable of its own."""
        for required, t in zip(self.required, translations, strict=True):
            if not required:
                continue
            either = re.compile("|".join(map(re.escape, sorted(set(required), key=len,
                                                                reverse=True))))
            at = {m.start(): m.group() for m in KINDS["template"].finditer(t.text)}
            at.update({m.start(): m.group() for m in either.finditer(t.text)})
            if [at[i] for i in sorted(at)] != required:
                return False
        return True

    def hardened(self) -> Paragraph:
        """This paragraph with every placeholder taken out (itself where none was left in)."""
        return self if self._again is None else Paragraph(*self._again)

    def render(self, translations: Sequence[Translation]) -> str:
        """The translated paragraph, from one translation per input (with its alignment when
        marked; without, the words are taken to follow in order)."""
        words = [t.text.split() for t in translations]
        links = [_links(t.alignment, len(self.source.words[k]), len(words[k]))
                 for k, t in enumerate(translations)]
        layout = Layout(words, links)
        bounds = [0] + [x for s in self.sentences for x in (s.start, s.end)] + [len(self.text)]
        gaps = [self.escape(self.text[a:b]) for a, b in zip(bounds[::2], bounds[1::2])]
        return render(layout, gaps, place(self.root, self.source, layout), self.escape,
                      self.columns)


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
