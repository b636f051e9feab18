"""`mt translate --input-format jsonl`: each input line a JSON object, a record, that carries
its source text and, optionally, its own glossary and target prefix:

    {"src": "Der Vertrag gilt.", "glossary": [["Vertrag", "agreement"]], "prefix": "The"}

A record's glossary is added to the --glossary file's for that line alone (an entry of a source
term the file has takes the file's entry's place). A record that is not one is a DataError
naming its line, checked as a glossary file is (mt.glossary)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from mt.errors import DataError
from mt.glossary import Glossary
from mt.textio import iter_lines

KEYS = ("src", "glossary", "prefix")


@dataclass(frozen=True)
class Record:
    src: str
    glossary: Glossary | None = None  # the line's own entries, or None
    prefix: str = ""  # a target prefix ("" for none)


def parse(line: str, where: str) -> Record:
    """One input line as a Record; a DataError naming `where` (FILE:LINE) for anything else."""
    if not line.strip():
        raise DataError(f"{where}: an empty line; give one JSON object a line, "
                        '{"src": "..."}')
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise DataError(f"{where}: not JSON ({e.msg}, column {e.colno}); give one JSON object "
                        'a line, {"src": "..."}') from None
    if not isinstance(obj, dict):
        raise DataError(f'{where}: not a JSON object; give one JSON object a line, '
                        '{"src": "..."}')
    unknown = [k for k in obj if k not in KEYS]
    if unknown:
        raise DataError(f"{where}: unknown key {unknown[0]!r}; a record has "
                        f"{', '.join(KEYS)}")
    src, prefix, pairs = obj.get("src"), obj.get("prefix"), obj.get("glossary")
    if not isinstance(src, str):
        raise DataError(f'{where}: "src" is {"missing" if src is None else "not a string"}; '
                        "every record has its source text")
    if "\n" in src or "\r" in src:
        raise DataError(f'{where}: "src" holds a line break; give one line (a paragraph with '
                        "--split-sentences) a record")
    if prefix is not None and not isinstance(prefix, str):
        raise DataError(f'{where}: "prefix" is not a string')
    if pairs is not None and not isinstance(pairs, list):
        raise DataError(f'{where}: "glossary" is not a list; give [["source term", '
                        '"target term"], ...]')
    glossary = Glossary.of(pairs, f"{where}: glossary") if pairs else None
    return Record(src, glossary, prefix or "")


def records(lines: Iterable[str], name: str, prefixes: bool = True) -> Iterator[Record]:
    """Each line of a file (name: as errors call it) as a Record, as it is read; prefixes:
    whether a record may have one (not where a line is split into sentences)."""
    for n, line in enumerate(lines, 1):
        r = parse(line, f"{name}:{n}")
        if r.prefix and not prefixes:
            raise DataError(f'{name}:{n}: "prefix": not with --split-sentences or --keep (a '
                            "prefix is a sentence's, not a paragraph's)")
        yield r


def check(path: str, prefixes: bool = True) -> bool:
    """Read every record of a file before any work (a DataError at the first bad one), as
    records does; whether any has a glossary. From stdin ('-') records are checked as they
    come."""
    if path == "-":
        return False
    return any([r.glossary is not None
                for r in records(iter_lines(path, warn_invalid=False), path, prefixes)])


def columns(found: Iterator[Record]) -> tuple[Iterator[str], Iterator[str],
                                             Iterator[Glossary | None]]:
    """The records' sources, prefixes and glossaries as three streams of equal length, each
    read as far as the furthest one (Translator.translate_stream reads them a chunk at a
    time)."""
    a, b, c = itertools.tee(found, 3)
    return (r.src for r in a), (r.prefix for r in b), (r.glossary for r in c)
