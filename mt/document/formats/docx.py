"""Word files (.docx): each paragraph's text translated, its runs' formatting kept, the file
written anew from the original bytes (mt.document.docx; python-docx, the `docx` extra)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import replace

from mt.document import docx
from mt.document.formats import DocumentFormat
from mt.document.markup import Block
from mt.document.paragraph import Settings


class DocxFormat(DocumentFormat):
    name = "docx"
    extensions = (".docx",)
    content_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    binary = True

    def settings(self, settings: Settings) -> Settings:
        return replace(settings, lines=False, escape=docx.clean)

    def parse(self, source: bytes, name: str) -> tuple[list[str | Block], list[str]]:
        """A Block per paragraph of text, "" for one without (written back untouched)."""
        blocks = (docx.read(p)[0] for p in docx.paragraphs(docx.open_docx(source, name)))
        return [b if b.text.strip() else "" for b in blocks], []

    def render(self, source: bytes, name: str, parts: Sequence[str | Block],
               pieces: Sequence[str]) -> tuple[str, bytes]:
        """The file (opened afresh from source, so a document renders again) with each
        paragraph's runs written anew, and the paragraphs' translations as text, one a line."""
        doc, texts = docx.open_docx(source, name, checked=True), []  # as parse read it
        for p, part, piece in zip(docx.paragraphs(doc), parts, pieces, strict=True):
            if isinstance(part, str):
                continue
            _, nodes, base = docx.read(p)
            docx.write(p, piece, nodes, base)
            texts.append(docx.MARK.sub("", piece))
        out = io.BytesIO()
        doc.save(out)
        return "\n".join(texts), out.getvalue()


FORMAT = DocxFormat()
