"""A memory's pairs in and out of files: read by the corpus formats' readers
(mt.corpus_formats, never a reader of its own), written as TMX 1.4 or TSV.

A file's format is its name's (`.tmx`, `.po`, `.xlf`, `.tsv`, `.jsonl`, ... as
`corpus_formats.format_of` says); a name that says none is a prefix of two plain files,
`{FILE}.{src}` and `{FILE}.{tgt}` (or their `.gz`), line i of one translating line i of the other.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO
from xml.sax.saxutils import XMLGenerator

from mt.corpus_formats import CorpusSource, Pairs, format_of
from mt.errors import DataError
from mt.textio import split_path

# What XML 1.0 cannot hold, escaped or not: a pair with one of these stays out of a TMX.
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def source_of(file: str | Path, langs: tuple[str, str]) -> CorpusSource:
    """The corpus a file given to `mt memory add` is, its format found by its name."""
    path = Path(file)
    name = format_of(path)
    if name is not None:
        if not path.is_file():
            raise DataError(f"{path}: not found; check the path")
        return CorpusSource(path.name, name, (path,), langs)
    paths = tuple(split_path(path.parent, path.name, lang) for lang in langs)
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise DataError(f"{path}: neither a file whose name says its format (.tmx, .po, .xlf, "
                        f".tsv, .jsonl, ...) nor the prefix of two plain files ({missing[0]} "
                        "not found)")
    return CorpusSource(path.name, "plain", paths, langs)


def file_pairs(file: str | Path, langs: tuple[str, str]) -> Pairs:
    """The (source, target) pairs of a file, in the memory's languages."""
    return source_of(file, langs).pairs()


def write_tmx(pairs: Iterable[tuple[str, str]], out: TextIO, langs: tuple[str, str]) -> int:
    """The pairs as a TMX 1.4 document (escaped by the stdlib's XMLGenerator); how many pairs
    were left out because XML cannot hold a character of theirs (a control character)."""
    xml = XMLGenerator(out, encoding="utf-8", short_empty_elements=True)
    xml.startDocument()
    xml.startElement("tmx", {"version": "1.4"})
    xml.startElement("header", {
        "creationtool": "mt", "creationtoolversion": "0.1", "datatype": "plaintext",
        "segtype": "sentence", "adminlang": "en", "srclang": langs[0], "o-tmf": "mt-memory"})
    xml.endElement("header")
    xml.startElement("body", {})
    left_out = 0
    for pair in pairs:
        if any(NOT_XML.search(text) for text in pair):
            left_out += 1
            continue
        xml.startElement("tu", {})
        for lang, text in zip(langs, pair):
            xml.startElement("tuv", {"xml:lang": lang})
            xml.startElement("seg", {})
            xml.characters(text)
            xml.endElement("seg")
            xml.endElement("tuv")
        xml.endElement("tu")
        out.write("\n")
    xml.endElement("body")
    xml.endElement("tmx")
    xml.endDocument()
    out.write("\n")
    return left_out


def write_tsv(pairs: Iterable[tuple[str, str]], out: TextIO) -> int:
    """The pairs as `source TAB target` lines; how many were left out because a side holds a
    tab or a line break (which TSV cannot: export those as TMX)."""
    left_out = 0
    for source, target in pairs:
        if any(c in text for text in (source, target) for c in "\t\n\r"):
            left_out += 1
            continue
        out.write(f"{source}\t{target}\n")
    return left_out
