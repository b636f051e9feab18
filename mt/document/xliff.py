"""XLIFF 1.2 and 2.0 as documents: each segment still to translate gets the translation of its
source as its target; every other byte of the file is written back as it was.

The file is read by mt.l10n.xliff, which says where each segment's source and target are in
its bytes; the parts are the bytes between the edits, as they were, and the edits: a new
`<target>` after the `</source>` (indented as the `<source>` is), or in place of the target
it replaces, and the start tags that say a target's state and language, written anew. A
segment is translated when it has no target, or an empty one (or any, with `overwrite`),
unless it is under `translate="no"`.

What a reviewer sees: XLIFF 1.2's `<target state="needs-review-translation"
state-qualifier="mt-suggestion">` (the standard's values for a machine translation to review);
2.0's `<segment state="initial" subState="mt:machine-translation">` (2.0 puts the state on the
segment; `subState` is its place for a tool's own value, `prefix:value`).

With a translation memory (`reuse`: decode.memory), a segment without inline codes whose whole
source the memory holds exactly (100%) gets the stored target as it is, as a PO entry does: a
person's translation, not a machine's to review. XLIFF 1.2 has a value for it,
`state-qualifier="exact-match"` ("the source text of a segment is exactly the same as the
source text of a segment that was translated previously"), with `state="translated"` (not
final: no one signed it off for this file); 2.0 has no qualifier list, so `state="translated"
subState="mt:exact-match"`. Below 100% (decode.memory_reuse lower), the stored target of
another source, for a reviewer to check as a CAT tool's fuzzy match: 1.2's
`state="needs-review-translation" state-qualifier="fuzzy-match"`, 2.0's `state="initial"
subState="mt:fuzzy-match"`. A segment with codes is the model's (each sentence looked up on its
own): a memory's target is plain text, and would lose the codes. A file that names no
target language gets the translator's (`target-language` on each 1.2 `<file>`, `trgLang` on
2.0's `<xliff>`).

Inline codes go into the source's Block as HTML's tags do (mt.document.markup): a paired code
(`<g>`, `<pc>`, `<mrk>`, and halves of one that pair up) an Element around its words, a code
kept whole (`<x/>`, `<ph>`, `<bpt>`...) a Leaf; mt.document.placement puts each back once,
where the word alignment says, properly nested. The target's codes are the source's, as
written: XLIFF's targets carry the same codes, with the same ids.
"""

from __future__ import annotations

import html
import io
from collections.abc import Callable
from xml.sax.saxutils import quoteattr

from mt.document.markup import Block
from mt.document.placement import Element
from mt.l10n.inline import Piece, plain
from mt.l10n.xliff import Languages, Segment, Tag, read
from mt.memory.match import Match

REVIEW = {"1.2": {"state": "needs-review-translation", "state-qualifier": "mt-suggestion"},
          "2.0": {"state": "initial", "subState": "mt:machine-translation"}}
REUSED = {"1.2": {"state": "translated", "state-qualifier": "exact-match"},
          "2.0": {"state": "translated", "subState": "mt:exact-match"}}
FUZZY = {"1.2": {"state": "needs-review-translation", "state-qualifier": "fuzzy-match"},
         "2.0": {"state": "initial", "subState": "mt:fuzzy-match"}}
# attribute values written back: what the parser normalized to spaces kept as written
ENTITIES = {"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}

Edit = tuple[int, int, list]  # bytes [at, end) of the file replaced by parts (str, Block)


def parse(source: str, name: str, target: str = "", overwrite: bool = False,
          reuse: Callable[[str], Match | None] | None = None
          ) -> tuple[list[str | Block], list[str]]:
    """The parts of an XLIFF text: what is written back as it is (str) and a Block per
    segment to translate (its translation the new target's text). target: the language
    written where the file names none ("": none written); overwrite: translate segments
    that have a target too; reuse: a memory's match for a text whose target is used as it is
    (None: no memory). A DataError for a text that is not XML or not XLIFF."""
    data = source.encode("utf-8")
    edits: list[Edit] = []
    for item in read(io.BytesIO(data), name):
        if isinstance(item, Languages):
            if target and not item.target:
                edits.append(_retag(item.tag, {item.target_key: target}))
        elif item.translate and (item.untranslated or overwrite) and plain(item.source):
            edits += _translated(item, data, reuse)
    parts: list[str | Block] = []
    done = 0
    for at, end, new in sorted(edits, key=lambda e: e[0]):
        parts += [data[done:at].decode("utf-8"), *new]
        done = end
    parts.append(data[done:].decode("utf-8"))
    return parts, []


def _translated(s: Segment, data: bytes, reuse: Callable[[str], Match | None] | None = None
                ) -> list[Edit]:
    """The edits that give a segment its translation, the memory's where reuse has a match for
    its whole source (codes aside), else the model's: the target, and 2.0's state."""
    stored = None
    if reuse is not None and all(p.kind == "text" for p in s.source):
        stored = reuse(plain(s.source))
    review = (REVIEW if stored is None else REUSED if stored.exact else FUZZY)[s.version]
    old = s.target_tag
    name = old.name if old else s.source_tag.name.removesuffix("source") + "target"
    attrs = dict(old.attrs if old else {})
    if s.version == "1.2":
        attrs |= review
    text = _block(s.source, data) if stored is None else escape(stored.target)
    new = [f"<{name}{_attributes(attrs)}>", text, f"</{name}>"]
    edits = [(old.at, s.target_end, new) if old else
             (s.after_source, s.after_source, [s.indent, *new])]
    if s.version == "2.0":
        edits.append(_retag(s.holder, review))
    return edits


def _retag(tag: Tag, attrs: dict[str, str]) -> Edit:
    """A start tag written anew with attrs set (in its place if it has them, else last).
    The tags written anew (<xliff>, <file>, <segment>) have content: none ends in `/>`."""
    return tag.at, tag.end, [f"<{tag.name}{_attributes(tag.attrs | attrs)}>"]


def escape(text: str) -> str:
    """Text as an XML element's content: &, < and > escaped."""
    return html.escape(text, quote=False)


def _attributes(attrs: dict[str, str]) -> str:
    return "".join(f" {k}={quoteattr(v, ENTITIES)}" for k, v in attrs.items())


def _block(pieces: list[Piece], data: bytes) -> Block:
    """A source's text and its codes as the Block whose translation is the target."""
    block = Block()
    open_: list[Element] = [block.root]
    for p in pieces:
        raw = data[p.at:p.end].decode("utf-8")
        if p.kind == "text":
            block.add_text(p.text)
        elif p.kind == "code":
            block.add_leaf(open_[-1], raw)
        elif p.kind == "open":
            e = Element(len(block.text), len(block.text), raw)
            open_[-1].children.append(e)
            open_.append(e)
        else:
            e = open_.pop()
            e.end, e.close = len(block.text), raw
    return block
