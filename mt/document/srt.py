"""SubRip subtitles (.srt): each cue's text translated, its number and timing kept as they
are. A cue's lines are one text (a sentence often runs over two), translated onto one line.
A timing that is not `HH:MM:SS,mmm --> HH:MM:SS,mmm` is a DataError naming its line."""

from __future__ import annotations

import re

from mt.document.markup import Block
from mt.errors import DataError

TIMING = re.compile(r"\s*\d{1,3}:[0-5]\d:[0-5]\d[,.]\d{1,3} --> \d{1,3}:[0-5]\d:[0-5]\d[,.]\d{1,3}"
                    r"(?:\s.*)?\s*")


def parse(source: str, name: str = "subtitles") -> tuple[list[str | Block], list[str]]:
    """The parts of an .srt text: numbers, timings and blank lines as they are, and each cue's
    text a Block; no notes (what is wrong is an error)."""
    lines = source.splitlines(keepends=True)
    parts: list[str | Block] = []
    n = 0
    while n < len(lines):
        if not lines[n].strip():
            parts.append(lines[n])
            n += 1
            continue
        if not lines[n].strip().lstrip("\ufeff").isdigit():
            raise DataError(f"{name}:{n + 1}: expected a cue number, found {lines[n].strip()!r}; "
                            "is it an .srt file?")
        if n + 1 >= len(lines) or not TIMING.fullmatch(lines[n + 1]):
            found = lines[n + 1].strip() if n + 1 < len(lines) else "the end of the file"
            raise DataError(f"{name}:{n + 2}: a broken timing ({found!r}); expected "
                            "HH:MM:SS,mmm --> HH:MM:SS,mmm")
        parts.append(lines[n] + lines[n + 1])
        n += 2
        text = []
        while n < len(lines) and lines[n].strip():
            text.append(lines[n])
            n += 1
        if text:
            ending = text[-1][len(text[-1].rstrip("\r\n")):] or ""
            parts.append(Block(" ".join(x.strip() for x in text)))
            parts.append(ending)
    return parts, []
