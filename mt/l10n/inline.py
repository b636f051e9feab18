"""The content of a segment (an XLIFF source or target, a TMX seg): its text and inline codes.

Inline codes are markup a translator keeps, not text: a paired code's tags around words
(XLIFF's `<g>`, `<pc>`, `<mrk>`; TMX's `<hi>`) and codes kept whole, each a placeholder: `<x/>`,
`<ph>`, `<it>`, `<cp/>`, and the halves of a code whose tags are apart, `<bpt>`/`<ept>`,
`<bx/>`/`<ex/>`, `<sc/>`/`<ec/>` (`<sm/>`/`<em/>`). Those halves become a pair of tags again
(`pair`) where they enclose words properly nested, as `<g>` would; otherwise each stays a
placeholder. A code's own content (a `<ph>`'s native markup, a `<bpt>`'s) is no text of the
segment; a protected span's (`<mrk mtype="protected">`, `<mrk translate="no">`) is, but it is
kept whole too.

The plain text (`plain`) is what a training pair holds: the segment's words without the
codes, whitespace collapsed. When mt translates a document the codes are taken out the same
way and put back by the word alignment (mt.document.placement), so the model sees the same
kind of sentence in training and in use; codes in the training text would teach it ids and
tags it never sees when translating.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mt.l10n.xml import Event, local

BEGINS = frozenset("bpt bx sc sm".split())  # a paired code's start, apart from its end
ENDS = frozenset("ept ex ec em".split())


@dataclass
class Piece:
    kind: str  # "text"; "open", "close": a paired code's tags; "code": kept whole
    at: int  # its bytes in the file
    end: int
    text: str = ""  # text: its characters; a protected code: its content's; else ""
    pair: tuple[str, str] | None = None  # BEGINS/ENDS: ("begin" or "end", the pair's id)


@dataclass
class Content:
    """One element's content read event by event (`add`); pieces, in order, once read."""

    paired: frozenset[str]  # the elements whose tags go around words
    pieces: list[Piece] = field(default_factory=list)
    open: list[int] = field(default_factory=list)  # the open paired codes' pieces
    whole: list = field(default_factory=list)  # in a code kept whole: [at, depth, pair, text]

    def add(self, e: Event) -> bool:
        """Take the next event inside the element; False for the element's own end."""
        if self.whole:
            self._inside_whole(e)
        elif e.kind == "text":
            self.pieces.append(Piece("text", e.at, e.end, e.text))
        elif e.kind == "start":
            name = local(e.name)
            if name in self.paired and not _protected(name, e.attrs):
                self.open.append(len(self.pieces))
                self.pieces.append(Piece("open", e.at, e.end))
            else:
                self.whole = [e.at, 1, _pair(name, e.attrs), [] if _protected(name, e.attrs)
                              else None]
        elif e.kind == "end":
            if not self.open:
                return False
            start = self.pieces[self.open.pop()]
            if e.at == e.end:  # an empty element, `<g id="1"/>`: its start tag is all of it
                start.kind = "code"
            else:
                self.pieces.append(Piece("close", e.at, e.end))
        return True

    def _inside_whole(self, e: Event) -> None:
        at, depth, pair, words = self.whole
        depth += (e.kind == "start") - (e.kind == "end")
        if e.kind == "text" and words is not None:
            words.append(e.text)
        if depth:
            self.whole[1] = depth
            return
        self.whole = []
        self.pieces.append(Piece("code", at, e.end, "".join(words or ()), pair))

    def done(self) -> list[Piece]:
        """The pieces, the halves of codes that enclose words properly nested made a pair."""
        _pair_halves(self.pieces)
        return self.pieces


def _protected(name: str, attrs: dict[str, str]) -> bool:
    return name == "mrk" and (attrs.get("mtype") == "protected" or attrs.get("translate") == "no")


def _pair(name: str, attrs: dict[str, str]) -> tuple[str, str] | None:
    """A half's side and the id its other half has: 1.2 `rid` (else `id`), 2.0 `startRef`."""
    if name in BEGINS:
        return "begin", attrs.get("rid") or attrs.get("id", "")
    if name in ENDS:
        return "end", attrs.get("rid") or attrs.get("startRef") or attrs.get("id", "")
    return None


def _pair_halves(pieces: list[Piece]) -> None:
    """A begin and its end with the codes between them balanced become open and close."""
    stack: list[int] = []  # open pieces and begun halves, innermost last
    for i, p in enumerate(pieces):
        if p.kind == "open" or (p.pair and p.pair[0] == "begin"):
            stack.append(i)
        elif p.kind == "close":
            while stack and pieces[stack[-1]].kind != "open":
                stack.pop()  # halves begun inside and not ended there stay codes
            if stack:
                stack.pop()
        elif p.pair and stack and pieces[stack[-1]].pair == ("begin", p.pair[1]):
            pieces[stack.pop()].kind, p.kind = "open", "close"


def plain(pieces: list[Piece]) -> str:
    """The words of a segment's content, without its codes, whitespace collapsed."""
    return " ".join("".join(p.text for p in pieces if p.kind in ("text", "code")).split())
