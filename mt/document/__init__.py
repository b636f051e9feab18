"""Real text through a Translator: paragraphs split into sentences and put back together,
placeholders kept out of the model's sight, inline markup put back around the right words
(docs/documents.md).

    from mt import Translator
    from mt.document import translate_document
    translate_document(Translator.load("runs/m30k"), "<p>Ein <b>Hund</b> rennt.</p>", "html")

A Document is a text made ready: `inputs`, the sentences the model translates (with their
alignments when `marked`: something is to be put back); `render` assembles their
translations. mt serve gathers the inputs of many documents into one batch this way. A
DocxDocument is a Word file (bytes) made ready the same way (mt.document.docx).
"""

from __future__ import annotations

import html
import io
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from mt.document import docx, markdown, markup, srt
from mt.document.markup import Block
from mt.document.paragraph import Paragraph, Settings
from mt.document.placeholders import compile_keep
from mt.document.starters import starts_sentence
from mt.errors import DataError
from mt.glossary import Glossary, GlossaryLike, as_glossary
from mt.records import Translation
from mt.translator import CHUNK_LINES, Translator, glossaries_mismatch

FORMATS = ("text", "html", "md", "srt")  # what a text document is written in
BINARY_FORMATS = ("docx",)  # documents that are files, not text (translate_document's bytes)
EXTENSIONS = {".txt": "text", ".text": "text", ".html": "html", ".htm": "html", ".xhtml": "html",
              ".md": "md", ".markdown": "md", ".srt": "srt", ".docx": "docx"}

__all__ = ["BINARY_FORMATS", "EXTENSIONS", "FORMATS", "Document", "DocumentTranslation",
           "DocxDocument", "align_options", "compile_keep", "decode_text", "make_document",
           "parse", "settings", "translate_document", "translate_inputs", "translate_lines"]


@dataclass
class DocumentTranslation:
    text: str  # the translated document (a .docx: its paragraphs' translations, one a line)
    # each sentence as the model saw it (placeholders out), with its translation
    sentences: list[tuple[str, Translation]] = field(default_factory=list)
    cut: int = 0  # sentence pieces from sentences too long for the model, cut to fit
    notes: list[str] = field(default_factory=list)  # what was not well-formed
    data: bytes | None = None  # the translated file, for a BINARY_FORMAT


def decode_text(data: bytes, name: str = "document") -> str:
    """A text document's bytes as text: UTF-8, not binary; a DataError in one line else."""
    if b"\0" in data:
        raise DataError(f"{name}: a binary file (it holds NUL bytes), not a text document")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{name}: not UTF-8 (byte {e.start}); convert it to UTF-8 first"
                        ) from None


def parse(text: str, format: str, name: str = "document") -> tuple[list[str | Block], list[str]]:
    """A text in a FORMAT as what is written back as it is (str) and Blocks to translate, and
    notes on what was not well-formed; a DataError (name: the file) for .srt that cannot be
    read. Plain text is one Block."""
    if format == "text":
        return [Block(text)], []
    if format == "srt":
        return srt.parse(text, name)
    return (markup if format == "html" else markdown).parse(text)


class Document:
    """A text in a FORMAT, split into what is written back as it is and Paragraphs."""

    def __init__(self, text: str, format: str, settings: Settings, name: str = "document"):
        parts, self.notes = parse(text, format, name)
        if format != "text":  # a line break is whitespace; HTML's text escaped
            escape = (lambda s: html.escape(s, quote=False)) if format == "html" else str
            settings = replace(settings, lines=False, escape=escape)
        self.parts = [p if isinstance(p, str) else Paragraph(p.text, settings, p.root)
                      for p in parts]
        paragraphs = self.paragraphs
        self.inputs = [x for p in paragraphs for x in p.inputs]
        self.marked = any(p.marked for p in paragraphs)
        self.aligned = [x for p in paragraphs for x in p.aligned]  # per input: needs it

    @property
    def paragraphs(self) -> list[Paragraph]:
        return [p for p in self.parts if isinstance(p, Paragraph)]

    def render(self, translations: Sequence[Translation]) -> DocumentTranslation:
        """The document from one translation per input, in order."""
        out, done = [], 0
        for p in self.parts:
            if isinstance(p, str):
                out.append(p)
                continue
            mine = translations[done:done + len(p.inputs)]
            done += len(p.inputs)
            out.append(p.render(mine))
        return DocumentTranslation("".join(out), list(zip(self.inputs, translations,
                                                          strict=True)),
                                   sum(p.cut for p in self.paragraphs), self.notes)


class DocxDocument:
    """A .docx file made ready as a Document is: `inputs`, `marked`, `aligned`; `render`
    writes the file anew with the translations (the original bytes stay as they are)."""

    def __init__(self, data: bytes, settings: Settings, name: str = "document"):
        self.data, self.name, self.notes = data, name, []
        settings = replace(settings, lines=False, escape=docx.clean)
        self.paragraphs = []  # one per docx.paragraphs, None where there is no text
        for p in docx.paragraphs(docx.open_docx(data, name)):
            block = docx.read(p)[0]
            self.paragraphs.append(Paragraph(block.text, settings, block.root)
                                   if block.text.strip() else None)
        paragraphs = [p for p in self.paragraphs if p is not None]
        self.inputs = [x for p in paragraphs for x in p.inputs]
        self.marked = any(p.marked for p in paragraphs)
        self.aligned = [x for p in paragraphs for x in p.aligned]

    def render(self, translations: Sequence[Translation]) -> DocumentTranslation:
        """The translated file (`data`) from one translation per input, in order, and its
        paragraphs as text, one a line."""
        doc = docx.open_docx(self.data, self.name)  # afresh, so render may be called again
        texts, done = [], 0
        for p, paragraph in zip(docx.paragraphs(doc), self.paragraphs, strict=True):
            if paragraph is None:
                continue
            _, nodes, base = docx.read(p)
            text = paragraph.render(translations[done:done + len(paragraph.inputs)])
            done += len(paragraph.inputs)
            docx.write(p, text, nodes, base)
            texts.append(docx.MARK.sub("", text))
        out = io.BytesIO()
        doc.save(out)
        cut = sum(p.cut for p in self.paragraphs if p is not None)
        return DocumentTranslation("\n".join(texts), list(zip(self.inputs, translations,
                                                             strict=True)),
                                   cut, [], out.getvalue())


def make_document(text: str | bytes, format: str, settings: Settings, name: str = "document"
                  ) -> Document | DocxDocument:
    """A Document of text in a FORMAT, or a DocxDocument of a .docx file's bytes."""
    if format == "docx":
        if not isinstance(text, bytes):
            raise TypeError("a .docx document is bytes (the file's), not text")
        return DocxDocument(text, settings, name)
    if isinstance(text, bytes):
        text = decode_text(text, name)
    return Document(text, format, settings, name)


def settings(translator: Translator, keep: Sequence[re.Pattern] = ()) -> Settings:
    """How a translator's documents are read: its source language's sentence splitter (and its
    run's sentence starters, unless decode.ignore_starters), its longest source
    (model.max_positions, less a tag's token), and keep."""
    room = translator.max_src - bool(translator.decoding.tag)

    def too_long(sentence: str) -> bool:  # a token is at least a character, less a mark
        return len(sentence) >= room and len(translator.src_tok.tokenize(sentence)) > room

    starters = [] if translator.decoding.ignore_starters else translator.run.starters
    begins = starts_sentence(starters, translator.src_tok.tokenize) if starters else None
    return Settings(translator.run.cfg.data.src_lang, True, too_long, tuple(keep), str, begins)


def align_options(translator: Translator, documents: Iterable[Document]) -> dict:
    """The decoding options that documents need: alignments, where something is to be put
    back and the engine gives them (else the words are taken to follow in order)."""
    marked = any(d.marked for d in documents)
    return {"align": True} if marked and translator.model is not None else {}


def translate_inputs(translator: Translator, documents: Sequence[Document | DocxDocument],
                     glossaries: Sequence[Glossary | None] | None = None, **decode
                     ) -> list[Translation]:
    """The best translation of each input of the documents, in order; with its word alignment
    where the document needs one (asked for those sentences only: it costs one more
    teacher-forced pass of the decoder) and the engine gives them. glossaries: each
    document's own glossary (added to decode's `glossary` for its sentences), or None."""
    inputs = [x for d in documents for x in d.inputs]
    aligned = [x and translator.model is not None for d in documents for x in d.aligned]
    own = None if glossaries is None else [g for d, g in zip(documents, glossaries,
                                                             strict=True) for _ in d.inputs]
    out: list[Translation | None] = [None] * len(inputs)
    for want in (False, True):
        rows = [i for i, x in enumerate(aligned) if x == want]
        if rows:
            more = {} if own is None else {"glossaries": [own[i] for i in rows]}
            found = translator.translate_nbest([inputs[i] for i in rows], **more,
                                               **{**decode, **({"align": True} if want else {})})
            for i, f in zip(rows, found, strict=True):
                out[i] = f[0]
    return out


def translate_document(translator: Translator, text: str | bytes, format: str = "text",
                       keep: Sequence[str] = (), name: str = "document", **decode
                       ) -> DocumentTranslation:
    """text (a FORMAT: plain text, HTML, Markdown, .srt subtitles; or "docx" and the file's
    bytes) translated: split into sentences, placeholders and keep's patterns (regular
    expressions) left as they are, markup (a .docx: its runs' formatting) put back. name: the
    document's, for errors. decode: decoding options, as for Translator.translate. A .docx
    comes back as the DocumentTranslation's `data`."""
    doc = make_document(text, format, settings(translator, compile_keep(keep)), name)
    return doc.render(translate_inputs(translator, [doc], **decode))


def translate_lines(translator: Translator, lines: Iterable[str], keep: Sequence[str] = (),
                    glossaries: Iterable[GlossaryLike] | None = None,
                    **decode) -> Iterator[DocumentTranslation]:
    """Each line a paragraph of plain text, translated as translate_document does, in order,
    a chunk of lines at a time (the translator's chunk_lines). glossaries: each line's own
    glossary (None for none; as Translator.translate takes them), read as far as the lines
    are."""
    ready = settings(translator, compile_keep(keep))
    it, own, read = iter(lines), None if glossaries is None else iter(glossaries), 0
    while chunk := list(itertools.islice(it, translator.chunk_lines or CHUNK_LINES)):
        docs = [Document(line, "text", ready) for line in chunk]
        mine = None
        if own is not None:
            mine = [as_glossary(g, f"glossaries[{n}]")
                    for n, g in enumerate(itertools.islice(own, len(chunk)), read)]
            if len(mine) != len(chunk):
                raise glossaries_mismatch(read + len(chunk), read + len(mine))
        read += len(chunk)
        found = translate_inputs(translator, docs, mine, **decode)
        done = 0
        for d in docs:
            yield d.render(found[done:done + len(d.inputs)])
            done += len(d.inputs)
