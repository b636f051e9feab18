"""XLIFF 1.2 and 2.0: each untranslated segment's source translated into its target, inline
codes put back by the alignment, every other byte kept; a segment a translation memory holds
exactly (or closely enough, decode.memory_reuse) gets its stored target (mt.document.xliff)."""

from __future__ import annotations

from dataclasses import replace

from mt.document import xliff
from mt.document.formats import DocumentFormat
from mt.document.markup import Block
from mt.document.paragraph import Settings


class XliffFormat(DocumentFormat):
    name, aliases = "xliff", ("xlf",)
    extensions = (".xlf", ".xliff")
    content_type = "application/xliff+xml; charset=utf-8"

    def settings(self, settings: Settings) -> Settings:
        return replace(settings, lines=False, escape=xliff.escape)

    def parse(self, source: str, name: str) -> tuple[list[str | Block], list[str]]:
        return xliff.parse(source, name)

    def read(self, source: str, name: str, settings: Settings
             ) -> tuple[list[str | Block], list[str]]:
        return xliff.parse(source, name, settings.target, settings.overwrite, settings.reuse)


FORMAT = XliffFormat()
