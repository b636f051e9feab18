"""Plain text: one paragraph, a line break ending a sentence (as a paragraph of lines does)."""

from __future__ import annotations

from mt.document.formats import DocumentFormat
from mt.document.markup import Block
from mt.document.paragraph import Settings


class TextFormat(DocumentFormat):
    name, aliases, cli_name = "text", ("txt",), "txt"
    extensions = (".txt", ".text")

    def settings(self, settings: Settings) -> Settings:
        return settings

    def parse(self, source: str, name: str) -> tuple[list[str | Block], list[str]]:
        return [Block(source)], []


FORMAT = TextFormat()
