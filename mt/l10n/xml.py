"""XML read safely, each event with where it is in the file's bytes (XLIFF, TMX).

The parser is expat (Python's pyexpat) with defusedxml's protection set on it: a file that
declares an entity is refused before anything is expanded (a billion laughs; an external
entity such as `<!ENTITY x SYSTEM "file:///etc/passwd">` is never read), so is any reference to
an external entity, and no external DTD is read (a TMX's `<!DOCTYPE tmx SYSTEM "tmx14.dtd">`
is fine: it is not fetched). Why not lxml or defusedxml's own parsers: writing an XLIFF back
with every byte that was not translated unchanged means splicing new targets into the file,
which takes each element's byte offsets. expat gives them (CurrentByteIndex); lxml keeps no
bytes, and defusedxml's parsers (SAX, ElementTree, minidom) hide the expat parser they set
these same handlers on.

Element names come as the file writes them, prefix and all (`xlf:source`): `local` drops it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO, NamedTuple
from xml.parsers import expat

from mt.errors import DataError

CHUNK = 1 << 16  # bytes parsed at a time


class Event(NamedTuple):
    kind: str  # "start", "end", "text", or "other": a comment, a CDATA mark, the prolog...
    name: str  # start, end: the element's name as written (`xlf:g`)
    attrs: dict[str, str] | None  # start: its attributes, in order, as written
    text: str  # text: its characters, references decoded (a text may come in several)
    at: int  # the event's first byte
    end: int  # the byte after it (an empty element `<x/>`: its start is the tag, its end empty)


def local(name: str) -> str:
    """An element's name without its prefix: `xlf:trans-unit` -> `trans-unit`."""
    return name.rpartition(":")[2]


def events(source: BinaryIO, name: str) -> Iterator[Event]:
    """The events of an XML file, in order, as it is read. A file that is not XML, or that
    declares or references an entity, is a DataError naming it and the line."""
    found: list[tuple] = []  # (kind, name, attrs, text, at] since the last chunk
    parser = _parser(found, name)
    last = None
    while True:
        try:
            chunk = source.read(CHUNK)
        except (OSError, EOFError) as e:  # a damaged .gz
            raise DataError(f"{name}: cannot read ({e}); is the file complete?") from None
        try:
            parser.Parse(chunk, not chunk)
        except expat.ExpatError as e:
            raise DataError(f"{name}:{e.lineno}: not XML ({expat.ErrorString(e.code)})"
                            ) from None
        for kind, tag, attrs, text, at in found:
            if last is not None:
                yield Event(*last, at)
            last = (kind, tag, attrs, text, at)
        found.clear()
        if not chunk:
            break
    if last is not None:
        yield Event(*last, parser.CurrentByteIndex)


def _parser(found: list[tuple], name: str) -> expat.XMLParserType:
    parser = expat.ParserCreate()
    parser.ordered_attributes = True
    parser.buffer_text = False  # a buffered text's CurrentByteIndex is where it ends
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)  # no external DTD

    def add(kind: str, tag: str = "", attrs=None, text: str = "") -> None:
        found.append((kind, tag, attrs, text, parser.CurrentByteIndex))

    def refuse(entity: str, *_) -> None:
        raise DataError(f"{name}:{parser.CurrentLineNumber}: declares the entity {entity!r}; "
                        "mt reads no entity declarations (XML bombs, external files): remove "
                        "them from the DOCTYPE")

    def refuse_external(context, base, system_id, public_id) -> None:
        raise DataError(f"{name}:{parser.CurrentLineNumber}: refers to an external entity "
                        f"({system_id}); mt reads no external files")

    parser.EntityDeclHandler = parser.UnparsedEntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse_external
    parser.StartElementHandler = lambda tag, a: add(
        "start", tag, dict(zip(a[::2], a[1::2])))
    parser.EndElementHandler = lambda tag: add("end", tag)
    parser.CharacterDataHandler = lambda text: add("text", text=text)
    parser.CommentHandler = parser.StartCdataSectionHandler = lambda *_: add("other")
    parser.EndCdataSectionHandler = parser.ProcessingInstructionHandler = lambda *_: add("other")
    parser.DefaultHandlerExpand = lambda _: add("other")
    return parser
