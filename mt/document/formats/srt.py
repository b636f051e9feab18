"""SubRip subtitles: each cue's text translated, its number and timing kept (mt.document.srt)."""

from __future__ import annotations

from mt.document import srt
from mt.document.formats import DocumentFormat
from mt.document.markup import Block


class SrtFormat(DocumentFormat):
    name = "srt"
    extensions = (".srt",)
    content_type = "application/x-subrip; charset=utf-8"

    def parse(self, source: str, name: str) -> tuple[list[str | Block], list[str]]:
        return srt.parse(source, name)


FORMAT = SrtFormat()
