"""HTML: its text translated, its tags put back around the right words (mt.document.markup)."""

from __future__ import annotations

import html
from dataclasses import replace

from mt.document import markup
from mt.document.formats import DocumentFormat
from mt.document.markup import Block
from mt.document.paragraph import Settings


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


class HtmlFormat(DocumentFormat):
    name = "html"
    extensions = (".html", ".htm", ".xhtml")
    content_type = "text/html; charset=utf-8"

    def settings(self, settings: Settings) -> Settings:
        return replace(settings, lines=False, escape=_escape)  # translated text escaped

    def parse(self, source: str, name: str) -> tuple[list[str | Block], list[str]]:
        return markup.parse(source, name)


FORMAT = HtmlFormat()
