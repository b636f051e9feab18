"""HTML (and XML-like markup in general) split into what is translated and what is not.

Python's html.parser reads the markup; every event keeps its raw text, so what is not
translated is written back byte for byte. Block elements (BLOCK) end a paragraph; the text
between them, with its inline elements (`<b>`, `<a href=...>`, any tag not named here), is one
paragraph, its tags an Element tree over the paragraph's plain text that mt.document.placement
puts back around the translated words. Void tags (`<br>`), comments and elements left alone
inline (`<code>`, anything with translate="no") are Leaves: put back whole at one place.
`<script>`, `<style>`, `<pre>` and the like are written back as they are.

Markup that is not well-formed is read as browsers read it, best-effort: an inline element
left open is closed where its paragraph ends, an end tag that closes nothing is dropped, and
the notes say so. Inline elements nested more than NESTING_MOST deep are refused (a
DataError naming the line): paragraph and placement walk the tree by recursion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

from mt.document.placement import Anchor, Element, Leaf
from mt.errors import DataError

BLOCK = frozenset(
    "address article aside blockquote body caption dd details dialog div dl dt fieldset "
    "figcaption figure footer form h1 h2 h3 h4 h5 h6 head header hr html legend li main nav "
    "ol option p section summary table tbody td tfoot th thead title tr ul base link meta "
    "col colgroup select".split())
KEEP_BLOCK = frozenset("script style pre textarea svg math template noscript iframe".split())
KEEP_INLINE = frozenset("code kbd samp var".split())
VOID = frozenset("area br embed img input param source track wbr".split())
NO_ANCHOR = Anchor("start", 0)  # a leaf's anchor until its paragraph's sentences are known
PUNCTUATION = frozenset(".,;:!?)]}")
# Inline elements open inside one another in a paragraph, at most: real pages nest a few, and
# the recursion over them (mt.document.paragraph, placement) stays far below Python's limit
# of 1,000 frames, whatever the caller's stack already holds.
NESTING_MOST = 100


@dataclass
class Block:
    """The text of a block element, to translate: its plain text (character references
    decoded), its inline markup as a tree over that text, and its raw markup (written back if
    it has no text)."""

    text: str = ""
    root: Element = field(default_factory=lambda: Element(0, 0))
    raw: list[str] = field(default_factory=list)
    last: Leaf | None = None  # the leaf just put in, while no text follows it
    # what the format itself keeps whole in text, (start, end) in order: a PO entry's format
    # directives (mt.l10n.format_strings), masked as placeholders are
    spans: list[tuple[int, int]] = field(default_factory=list)

    def add_leaf(self, parent: Element, text: str) -> None:
        """Something kept whole, at the end of the text so far, a child of parent."""
        self.last = Leaf(len(self.text), text, NO_ANCHOR)
        parent.children.append(self.last)

    def add_text(self, text: str) -> None:
        """More text. After a leaf (`see <img>.`), whitespace before punctuation goes: the
        model reads `see.`, and the leaf keeps its space before it."""
        if self.last is not None and text[:1] in PUNCTUATION and self.text[-1:].isspace():
            self.text = self.text.rstrip()
            self.last.at, self.last.space_before = len(self.text), True
        self.last = None
        self.text += text


class _Events(HTMLParser):
    """Each event with its offset in the source, so its raw text is the slice to the next."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.lines = [0]
        for line in source.splitlines(keepends=True):
            self.lines.append(self.lines[-1] + len(line))
        self.events: list[tuple[int, str, str, dict | str]] = []
        self.feed(source)
        self.close()

    def _add(self, kind: str, tag: str, data: dict | str) -> None:
        line, col = self.getpos()
        self.events.append((self.lines[line - 1] + col, kind, tag, data))

    def handle_starttag(self, tag, attrs):
        self._add("start", tag, dict(attrs))

    def handle_startendtag(self, tag, attrs):
        self._add("void", tag, dict(attrs))

    def handle_endtag(self, tag):
        self._add("end", tag, "")

    def handle_data(self, data):
        self._add("data", "", data)

    def handle_comment(self, data):
        self._add("other", "", data)

    handle_decl = handle_pi = unknown_decl = handle_comment


def parse(source: str, name: str = "document") -> tuple[list[str | Block], list[str]]:
    """The parts of an HTML text in order: raw strings, written back as they are, and the
    Paragraphs to translate; and notes on what was not well-formed. A DataError (name: the
    document's) for inline elements nested more than NESTING_MOST deep."""
    events = _Events(source).events
    ends = [e[0] for e in events[1:]] + [len(source)]
    parts: list[str | Block] = [source[:events[0][0]]] if events else [source]
    notes: list[str] = []
    block, stack = Block(), []  # stack: the open inline elements of block
    carried: list[str] = []  # inline tags opened in raw output (a paragraph without text)
    kept: list[str] = []  # the raw text of an element left alone, while in it
    keeping, depth, whole = "", 0, False  # whole: a block element left alone

    def flush() -> None:
        nonlocal block
        if block.text.strip():
            for e in reversed(stack):  # left open: closed here
                e.end, e.close = len(block.text), f"</{_tag(e.open)}>"
                notes.append(f"<{_tag(e.open)}> not closed before its paragraph ends")
            parts.append(block)
        else:
            parts.append("".join(block.raw))
            carried.extend(_tag(e.open) for e in stack)
        stack.clear()
        block = Block()

    def leaf(text: str) -> None:
        block.add_leaf(stack[-1] if stack else block.root, text)
        block.raw.append(text)

    for (start, kind, tag, data), end in zip(events, ends):
        raw = source[start:end]
        if keeping:
            kept.append(raw)
            depth += (tag == keeping) * ((kind == "start") - (kind == "end"))
            if depth == 0:
                if whole:
                    parts.append("".join(kept))
                else:
                    leaf("".join(kept))
                keeping = ""
        elif kind == "data":
            block.add_text(data)
            block.raw.append(raw)
        elif kind == "start" and (tag in KEEP_BLOCK or tag in KEEP_INLINE
                                  or data.get("translate") == "no"):
            whole = tag in KEEP_BLOCK or tag in BLOCK
            if whole:
                flush()
            keeping, depth, kept = tag, 1, [raw]
        elif tag in BLOCK:
            flush()
            parts.append(raw)
        elif kind in ("void", "other") or tag in VOID:
            leaf(raw)
            if tag == "br":  # a line break: the words on either side are two
                block.add_text("\n")
        elif kind == "start":
            if len(stack) == NESTING_MOST:
                line = source.count("\n", 0, start) + 1
                raise DataError(f"{name}:{line}: <{tag}> nests inline elements "
                                f"{NESTING_MOST + 1} deep, more than the {NESTING_MOST} mt "
                                "reads; close those left open, or flatten the markup")
            _open_inline(block, stack, raw)
        elif tag in [_tag(e.open) for e in stack]:
            _close_inline(block, stack, tag, raw, notes)
        elif tag in carried:
            carried.remove(tag)
            flush()
            parts.append(raw)
        else:
            notes.append(f"</{tag}> closes nothing: dropped")
    if keeping:
        notes.append(f"<{keeping}> not closed: left as it is")
        (parts.append if whole else leaf)("".join(kept))
    flush()
    return parts, notes


def _open_inline(block: Block, stack: list[Element], raw: str) -> None:
    """An inline element opens at the end of block's text, inside the innermost open one."""
    e = Element(len(block.text), len(block.text), raw)
    (stack[-1] if stack else block.root).children.append(e)
    stack.append(e)
    block.raw.append(raw)


def _close_inline(block: Block, stack: list[Element], tag: str, raw: str,
                  notes: list[str]) -> None:
    """The end tag raw closes the innermost open element named tag, and the ones opened inside
    it that were left open (each noted)."""
    while True:
        e = stack.pop()
        e.end = len(block.text)
        if _tag(e.open) == tag:
            e.close = raw
            break
        e.close = f"</{_tag(e.open)}>"
        notes.append(f"<{_tag(e.open)}> closed by </{tag}>")
    block.raw.append(raw)


def _tag(open_tag: str) -> str:
    """The name of a start tag's element: `<a href="x">` -> a."""
    return open_tag[1:].split(None, 1)[0].rstrip(">/").lower()
