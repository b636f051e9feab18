"""mt/l10n/xml.py: XML read safely with each event's bytes. An XML bomb and an external entity
are refused before anything is expanded or read; a file that is not XML is one line naming
its line."""

from __future__ import annotations

import io

import pytest
from xml_bombs import BOMB, EXTERNAL

from mt.errors import DataError
from mt.l10n.xml import events


def test_each_event_knows_its_bytes():
    data = '<a x=">">Grüße <b/>&amp;<!--c--><c>z</c></a>'.encode()
    found = [(e.kind, e.name, data[e.at:e.end].decode()) for e in events(io.BytesIO(data), "f")]
    assert found == [("start", "a", '<a x=">">'), ("text", "", "Grüße "), ("start", "b", "<b/>"),
                     ("end", "b", ""), ("text", "", "&amp;"), ("other", "", "<!--c-->"),
                     ("start", "c", "<c>"), ("text", "", "z"), ("end", "c", "</c>"),
                     ("end", "a", "</a>")]
    assert [e.text for e in events(io.BytesIO(data), "f") if e.kind == "text"] == \
        ["Grüße ", "&", "z"]


@pytest.mark.parametrize("data, line, message", [
    (BOMB, 3, "declares the entity 'lol'"),
    (EXTERNAL, 3, "declares the entity 'x'"),
    (b"<xliff>\n<file>\n</xliff>", 3, "not XML (mismatched tag)"),
    (b"msgid \"a\"\nmsgstr \"b\"\n", 1, "not XML (syntax error)"),
])
def test_a_bomb_an_external_entity_and_what_is_not_xml_are_refused(data, line, message):
    with pytest.raises(DataError) as e:
        list(events(io.BytesIO(data), "in.xlf"))
    assert str(e.value).startswith(f"in.xlf:{line}: {message}")
    assert "\n" not in str(e.value) and "lol" * 10 not in str(e.value)


def test_an_external_dtd_is_not_read(tmp_path):
    """A TMX names its DTD; it is not fetched, and nothing refers to an entity in it."""
    data = b'<!DOCTYPE tmx SYSTEM "file:///nonexistent/tmx14.dtd">\n<tmx><body/></tmx>'
    assert [e.name for e in events(io.BytesIO(data), "f") if e.kind == "start"] == \
        ["tmx", "body"]
