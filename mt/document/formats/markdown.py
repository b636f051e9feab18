"""Markdown: each block's text translated, its inline marks kept (mt.document.markdown)."""

from __future__ import annotations

from mt.document import markdown
from mt.document.formats import DocumentFormat
from mt.document.markup import Block


class MarkdownFormat(DocumentFormat):
    name = "md"
    extensions = (".md", ".markdown")
    content_type = "text/markdown; charset=utf-8"

    def parse(self, source: str, name: str) -> tuple[list[str | Block], list[str]]:
        return markdown.parse(source)


FORMAT = MarkdownFormat()
