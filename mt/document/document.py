"""A document made ready: its text (or file) in a format (mt.document.formats) split into what
is written back as it is and Paragraphs; `inputs`, the sentences the model translates (with
whether each needs its alignment: something is to be put back); `render` assembles their
translations into the document again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mt.document.formats import document_format
from mt.document.paragraph import Paragraph, Settings
from mt.errors import DataError
from mt.l10n.po import refuse_mo
from mt.records import Translation


@dataclass
class DocumentTranslation:
    text: str  # the translated document (a .docx: its paragraphs' translations, one a line)
    # each sentence as the source has it (placeholders in), with its translation
    sentences: list[tuple[str, Translation]] = field(default_factory=list)
    cut: int = 0  # sentence pieces from sentences too long for the model, cut to fit
    notes: list[str] = field(default_factory=list)  # what was not well-formed
    data: bytes | None = None  # the translated file, for a binary format (.docx)


def decode_text(data: bytes, name: str = "document") -> str:
    """A text document's bytes as text: UTF-8, not binary; a DataError in one line else."""
    refuse_mo(data, name)  # the one binary file given for a text one often enough to name
    if b"\0" in data:
        raise DataError(f"{name}: a binary file (it holds NUL bytes), not a text document")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{name}: not UTF-8 (byte {e.start}); convert it to UTF-8 first"
                        ) from None


class Document:
    """A source (text; a binary format's bytes) in a format (a name in FORMATS or an alias),
    split into what is written back as it is and Paragraphs. A text format's bytes are read as
    UTF-8 (decode_text); a binary format given a str is a TypeError."""

    def __init__(self, source: str | bytes, format: str, settings: Settings,
                 name: str = "document"):
        self.format, self.name = document_format(format), name
        if self.format.binary and not isinstance(source, bytes):
            raise TypeError(f"a .{self.format.name} document is bytes (the file's), not text")
        if not self.format.binary and isinstance(source, bytes):
            source = decode_text(source, name)
        self.source = source
        self.blocks, self.notes = self.format.read(source, name, settings)
        settings = self.format.settings(settings)
        self.parts = [p if isinstance(p, str) else Paragraph(p.text, settings, p.root, p.spans)
                      for p in self.blocks]
        self._gather()

    def _gather(self) -> None:
        paragraphs = self.paragraphs
        self.inputs = [x for p in paragraphs for x in p.inputs]
        self.written = [x for p in paragraphs for x in p.written]  # each input as written
        self.marked = any(p.marked for p in paragraphs)
        self.aligned = [x for p in paragraphs for x in p.aligned]  # per input: needs it

    @property
    def paragraphs(self) -> list[Paragraph]:
        return [p for p in self.parts if isinstance(p, Paragraph)]

    def harden(self, translations: Sequence[Translation | None]) -> list[Translation | None]:
        """Given one translation per input: each paragraph whose translation did not give
        back a placeholder left to the model (Paragraph.keeps) made again with every
        placeholder taken out; the translations of the others, and None for each input of
        those made again (the document's inputs are theirs now)."""
        out, done = [], 0
        for i, p in enumerate(self.parts):
            if isinstance(p, str):
                continue
            mine = list(translations[done:done + len(p.inputs)])
            done += len(p.inputs)
            if not p.keeps(mine):
                self.parts[i] = p.hardened()
                mine = [None] * len(self.parts[i].inputs)
            out += mine
        self._gather()
        return out

    def render(self, translations: Sequence[Translation]) -> DocumentTranslation:
        """The document from one translation per input, in order."""
        pieces, done = [], 0
        for p in self.parts:
            if isinstance(p, str):
                pieces.append(p)
                continue
            pieces.append(p.render(translations[done:done + len(p.inputs)]))
            done += len(p.inputs)
        text, data = self.format.render(self.source, self.name, self.blocks, pieces)
        return DocumentTranslation(text, list(zip(self.written, translations, strict=True)),
                                   sum(p.cut for p in self.paragraphs), self.notes, data)
