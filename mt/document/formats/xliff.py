"""XLIFF 1.2 and 2.0: each untranslated segment's source translated into its target, inline
codes put back by the alignment, every other byte kept (mt.document.xliff)."""

from __future__ import annotations

import html
from dataclasses import replace

from mt.document import xliff
from mt.document.formats import DocumentFormat
from mt.document.markup import Block
from mt.document.paragraph import Settings


def _escape(text: str) -> str:
    return html.escape(text, quote=False)  # &, < and >: what XML's text may not hold


class XliffFormat(DocumentFormat):
    name, aliases = "xliff", ("xlf",)
    extensions = (".xlf", ".xliff")
    content_type = "application/xliff+xml; charset=utf-8"

    def settings(self, settings: Settings) -> Settings:
        return replace(settings, lines=False, escape=_escape)

    def parse(self, source: str, name: str) -> tuple[list[str | Block], list[str]]:
        return xliff.parse(source, name)

    def read(self, source: str, name: str, settings: Settings
             ) -> tuple[list[str | Block], list[str]]:
        return xliff.parse(source, name, settings.target, settings.overwrite)


FORMAT = XliffFormat()
