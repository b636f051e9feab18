"""What `mt translate` writes for each input line, in each --format: text, the n-best format,
or one JSON object (shared by one process and --workers)."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from dataclasses import dataclass, field

from mt.glossary import Glossary
from mt.records import Translation, format_jsonl, format_nbest
from mt.translator import Translator


@dataclass
class Screen:
    """`mt translate --min-confidence`: a line whose best translation's confidence is below
    the threshold is written empty (in jsonl, "text" "" and "rejected": true); counted."""

    threshold: float
    rejected: int = 0
    sources: collections.deque[str] = field(default_factory=collections.deque)

    def read(self, lines: Iterator[str]) -> Iterator[str]:
        for line in lines:  # kept for the jsonl records' "src"
            self.sources.append(line)
            yield line

    def passed(self, stream: Iterator[list[Translation]]) -> Iterator[list[Translation]]:
        for found in stream:
            best = found[0]
            if best.confidence is not None and best.confidence < self.threshold:
                self.rejected += 1
                best.text, best.rejected = "", True
            yield found


def formatted(translator: Translator, lines: Iterator[str], output_format: str, nbest: bool,
              start: int = 0, prefixes: Iterator[str] | None = None,
              glossary: Glossary | None = None, screen: Screen | None = None,
              glossaries: Iterator[Glossary | None] | None = None) -> Iterator[str]:
    """What is written for each input line, in order: its translation, its n-best lines, or
    its JSON object, each ending in a newline. start: the n-best index of the first line.
    prefixes: one target prefix per line (Translator.translate_stream), or None; glossary:
    whose terms the translations keep, or None; glossaries: each line's own (added to
    glossary), or None; screen: --min-confidence, or None."""
    g = {"prefix": prefixes, "glossary": glossary, "glossaries": glossaries}
    if screen is not None:
        scored = output_format == "jsonl"  # its records give the score (else NaN: not rescored)
        for found in screen.passed(translator.translate_nbest_stream(screen.read(lines), scored,
                                                                     **g)):
            if output_format == "jsonl":
                yield format_jsonl(screen.sources.popleft(), found, False)
            else:
                yield found[0].text + "\n"
    elif output_format == "jsonl":
        sources: collections.deque[str] = collections.deque()  # read, not yet written

        def read() -> Iterator[str]:
            for line in lines:
                sources.append(line)
                yield line

        for found in translator.translate_nbest_stream(read(), **g):
            yield format_jsonl(sources.popleft(), found, nbest)
    elif nbest:
        for i, found in enumerate(translator.translate_nbest_stream(lines, **g), start):
            yield format_nbest(i, found)
    elif translator.decoding.align:  # text, a tab, the alignment
        for found in translator.translate_nbest_stream(lines, False, **g):
            yield f"{found[0].text}\t{found[0].alignment}\n"
    else:
        for text in translator.translate_stream(lines, **g):
            yield text + "\n"
