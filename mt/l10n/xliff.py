"""XLIFF 1.2 and 2.0 read as segments: each source with its target and where they are.

A segment is a 1.2 `<trans-unit>` (its `<source>` and `<target>`) or a 2.0 `<segment>` (in a
`<unit>`). Each comes with what writing a translation into the file takes: where a new
`<target>` goes (after the `</source>`, or a 1.2 `</seg-source>`), the span of the target it
replaces, and the start tags that say the state and the languages (`<file>` in 1.2, `<xliff>`
in 2.0), so that mt.document.xliff can splice a translation in and leave every other byte of
the file as it was. `translate="no"` (on a unit, group or file, inherited) is kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from mt.errors import DataError
from mt.l10n.inline import Content, Piece, plain
from mt.l10n.xml import Event, events, local

PAIRED = frozenset("g pc mrk".split())  # inline codes whose tags go around words


@dataclass
class Tag:
    """A start tag as the file has it: its name as written, attributes, bytes."""

    name: str
    attrs: dict[str, str]
    at: int
    end: int


@dataclass
class Languages:
    """A 1.2 `<file>` or the 2.0 `<xliff>`: the languages of the segments after it."""

    tag: Tag
    source: str
    target: str  # "" when the file names none
    target_key: str  # the attribute that names it: target-language (1.2), trgLang (2.0)


@dataclass
class Segment:
    version: str  # "1.2" or "2.0"
    translate: bool  # not under translate="no"
    holder: Tag  # the <trans-unit> (1.2) or <segment> (2.0)
    source: list[Piece] = field(default_factory=list)
    source_tag: Tag | None = None
    indent: str = ""  # the whitespace before <source>: a new <target>'s
    after_source: int = 0  # where a new <target> goes
    target: list[Piece] | None = None  # None: no <target>
    target_tag: Tag | None = None
    target_end: int = 0  # the byte after the </target>

    @property
    def untranslated(self) -> bool:
        """No target, or one without text (codes alone are no translation)."""
        return self.target is None or not plain(self.target)


def read(source: BinaryIO, name: str) -> Iterator[Languages | Segment]:
    """A file's Languages and Segments, in order, as it is read; a DataError for a file that
    is not XML, or not XLIFF 1.2 or 2.x."""
    walk = _Walk(name)
    for e in events(source, name):
        yield from walk.event(e)
    if not walk.version:
        raise DataError(f"{name}: not XLIFF (no <xliff> element)")


class _Walk:
    """The reader's state between events: the open elements, and the segment and content
    being read."""

    def __init__(self, name: str):
        self.name, self.version = name, ""
        self.stack: list[tuple[str, bool]] = []  # open elements: local name, translate
        self.segment: Segment | None = None
        self.content: Content | None = None  # a source's or target's, while in one
        self.reading = ""  # "source" or "target"
        self.before = ""  # the text since the last tag (the whitespace before <source>)

    def event(self, e: Event) -> Iterator[Languages | Segment]:
        if self.content is not None:
            if not self.content.add(e):
                self._end_content(e)
            return
        if e.kind == "text":
            self.before += e.text
        elif e.kind == "start":
            yield from self._start(e)
            self.before = ""
        elif e.kind == "end":
            name = local(e.name)
            self.stack.pop()
            if self.segment is not None and name in ("trans-unit", "segment"):
                yield self.segment
                self.segment = None
            elif self.segment is not None and name == "seg-source":
                self.segment.after_source = e.end
            self.before = ""

    def _start(self, e: Event) -> Iterator[Languages]:
        name, attrs = local(e.name), e.attrs
        parent = self.stack[-1] if self.stack else ("", True)
        translate = attrs.get("translate", "yes" if parent[1] else "no") != "no"
        self.stack.append((name, translate))
        tag = Tag(e.name, attrs, e.at, e.end)
        if not self.version:
            if name != "xliff":
                raise DataError(f"{self.name}: not XLIFF (its root is <{name}>, not <xliff>)")
            self.version = "2.0" if attrs.get("version", "").startswith("2") else "1.2"
            if self.version == "2.0":
                yield Languages(tag, attrs.get("srcLang", ""), attrs.get("trgLang", ""),
                                "trgLang")
        elif name == "file" and self.version == "1.2":
            yield Languages(tag, attrs.get("source-language", ""),
                            attrs.get("target-language", ""), "target-language")
        elif name == ("trans-unit" if self.version == "1.2" else "segment"):
            self.segment = Segment(self.version, translate, tag)
        elif self.segment is not None and parent[0] in ("trans-unit", "segment") and \
                name in ("source", "target"):
            self.content, self.reading = Content(PAIRED), name
            if name == "source":
                self.segment.source_tag = tag
                self.segment.indent = self.before if not self.before.strip() else ""
            else:
                self.segment.target_tag = tag

    def _end_content(self, e: Event) -> None:
        pieces, segment = self.content.done(), self.segment
        if self.reading == "source":
            segment.source, segment.after_source = pieces, e.end
        else:
            segment.target, segment.target_end = pieces, e.end
        self.content = None
        self.stack.pop()
        self.before = ""
