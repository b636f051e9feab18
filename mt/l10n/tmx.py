"""TMX translation memories read as units: each `<tu>`'s segments by language.

A `<tuv>` names its language by `xml:lang` (TMX 1.4) or `lang` (1.1); its `<seg>`'s text is read
as mt.l10n.inline reads a segment, `<hi>` a paired code and `<bpt>`, `<ept>`, `<it>`, `<ph>`,
`<ut>` codes, whose content (native markup) is no text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from mt.errors import DataError
from mt.l10n.inline import Content, plain
from mt.l10n.xml import events, local

PAIRED = frozenset({"hi"})


def units(source: BinaryIO, name: str) -> Iterator[dict[str, str]]:
    """Each unit's segments, {language tag as written: plain text}, in order, as the file is
    read; a DataError for a file that is not XML or not TMX."""
    unit: dict[str, str] | None = None
    lang, content, root = "", None, ""
    for e in events(source, name):
        if content is not None:
            if not content.add(e):
                unit[lang] = plain(content.done())
                content = None
            continue
        if e.kind != "start":
            if e.kind == "end" and local(e.name) == "tu" and unit is not None:
                yield unit
                unit = None
            continue
        tag = local(e.name)
        if not root:
            root = tag
            if tag != "tmx":
                raise DataError(f"{name}: not TMX (its root is <{tag}>, not <tmx>)")
        elif tag == "tu":
            unit = {}
        elif tag == "tuv" and unit is not None:
            lang = e.attrs.get("xml:lang") or e.attrs.get("lang", "")
        elif tag == "seg" and unit is not None:
            content = Content(PAIRED)
    if not root:
        raise DataError(f"{name}: not TMX (no <tmx> element)")
