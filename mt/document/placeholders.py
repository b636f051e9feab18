"""What a model must not translate: URLs, e-mail addresses, numbers (with their separators and
units), template variables (`{name}`, `{{ var }}`, `%s`, `%(name)d`), a program's command-line
options (`-v`, `--username=NAME`, `--output[=FILE]`, `--pid <PID>`) and what a user's --keep
patterns match. Each is taken out of the sentence before translation (the model never sees
it) and put back, exactly as it was, where the word alignment puts the word it followed
(mt.document.placement).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import regex

from mt.errors import DataError, UsageError

UNITS = ("%|‰|°[CF]?|€|\\$|£|¥|km/h|km²|m²|m³|km|cm|mm|kg|mg|ml|GB|MB|KB|kB|TB|GHz|MHz|kHz|Hz|"
         "kWh|kW|mAh|ms|min|h|m|g|l|s|V|W|t")
# Checked in this order; a later kind's match overlapping an earlier one's is dropped.
KINDS: dict[str, re.Pattern] = {
    "template": re.compile(r"\{\{.*?\}\}|\$?\{[\w.:!\[\]-]*\}|%(?:\(\w+\)|\d+\$)?[-+ 0#]*\d*"
                           r"(?:\.\d+)?[sdifxXeEgGcr](?!\w)"),
    "url": re.compile(r"\b(?:https?|ftp)://[^\s<>\"']+|\bwww\.[^\s<>\"']+\.[^\s<>\"']+"),
    "email": re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    "number": re.compile(r"(?:[$€£¥]\s?)?(?<![\w.,])[-+]?"
                         r"(?:\d{1,3}(?:[,.\u00a0\u202f' ]\d{3}(?!\d))+|\d+)"
                         r"(?:[.,]\d+|\.(?=\s+\w))?(?:\s?(?:" + UNITS + r")(?!\w))?"),
    # a dash or two and a letter not inside a word (`e-mail`, `a - b` and `-5` are not), with
    # its value's name
    "option": re.compile(r"(?<![\w/-])(?:--[A-Za-z][\w-]*|-[A-Za-z?](?![\w-]))"
                         r"(?:\[?=[\w<>.:-]+\]?| <[\w-]+>)?(?![\w-])"),
}
TRAILING = ".,;:!?'\""  # a URL's or address's last characters that end the sentence instead
# A --keep pattern is the user's: one that backtracks without end ('(a+)+$') must not hang the
# command or the server, so it runs on the `regex` engine under this limit per paragraph.
KEEP_SECONDS = 1.0


@dataclass(frozen=True)
class Point:
    """Something put back into the translation: `text` at `at` of the masked text."""

    at: int
    text: str
    space_before: bool = True  # whitespace was on its left in the source
    space_after: bool = True


@dataclass
class Masked:
    text: str  # what the model translates
    points: list[Point]  # what was taken out, in order
    kept: list[tuple[int, int, int]]  # the source's kept stretches: (start, end, masked start)

    def offset(self, at: int) -> int:
        """Where a character offset of the source is in the masked text (a place inside what
        was taken out: where that went)."""
        for start, end, masked in self.kept:
            if at <= end:
                return masked + max(0, at - start)
        return len(self.text)


def compile_keep(patterns: Sequence[str], command: str = "translate") -> list[regex.Pattern]:
    """--keep REGEX items (Python's syntax, run by the `regex` engine under KEEP_SECONDS); a wrong
    one is a UsageError naming it."""
    compiled = []
    for p in patterns:
        try:
            compiled.append(regex.compile(p, flags=regex.VERSION0))
        except regex.error as e:
            raise UsageError(command, "'--keep'", f"{p!r} is not a regular expression ({e})"
                             ) from None
    return compiled


def find(text: str, keep: Sequence[regex.Pattern] = (), masked: Sequence[str] = tuple(KINDS),
         given: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """The (start, end) of each placeholder in text, in order, none overlapping another: given
    (the document format's own, a PO entry's directives) first, then the user's patterns, then
    those of KINDS that masked names (decode.mask)."""
    found: list[tuple[int, int]] = list(given)
    for pattern in [*keep, *(p for kind, p in KINDS.items() if kind in masked)]:
        for a, b in _spans(pattern, text):
            if pattern in (KINDS["url"], KINDS["email"]):
                b = a + len(text[a:b].rstrip(TRAILING))
                if pattern is KINDS["url"] and text[b - 1] == ")" and "(" not in text[a:b]:
                    b -= 1
            if b > a and not any(a < e and s < b for s, e in found):
                found.append((a, b))
    return sorted(found)


def _spans(pattern: re.Pattern | regex.Pattern, text: str) -> list[tuple[int, int]]:
    """Where pattern matches in text; a user's (`regex`) pattern that runs past KEEP_SECONDS is
    a DataError."""
    if isinstance(pattern, re.Pattern):
        return [m.span() for m in pattern.finditer(text)]
    try:
        return [m.span() for m in pattern.finditer(text, timeout=KEEP_SECONDS)]
    except TimeoutError:
        raise DataError(f"--keep {pattern.pattern!r} ran past {KEEP_SECONDS:g} s on one paragraph: "
                        "it can match the same text in very many ways (as '(a|aa)+$' can); "
                        "write it with one way to match") from None


def mask(text: str, spans: Sequence[tuple[int, int]]) -> Masked:
    """text without the spans (sorted, not overlapping), each a Point where it was. The
    whitespace around a span is left once: `a URL here` becomes `a here`, `see URL.` `see.`,
    `URL here` `here`."""
    out, points, kept, pos, size = [], [], [], 0, 0
    for a, b in spans:
        left = a > 0 and text[a - 1].isspace()
        right = b < len(text) and text[b].isspace()
        cut, resume = a, b
        if right and (left or size + a - pos == 0):  # between words, or first: one space goes
            resume = b + 1
        elif left and not right:  # before punctuation or the end: the space before goes
            cut = max(pos, a - 1)
        kept.append((pos, cut, size))
        out.append(text[pos:cut])
        size += cut - pos
        points.append(Point(size, text[a:b], left, right))
        pos = resume
    kept.append((pos, len(text), size))
    out.append(text[pos:])
    return Masked("".join(out), points, kept)
