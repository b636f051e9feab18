"""Real text through a Translator: paragraphs split into sentences and put back together,
placeholders kept out of the model's sight, inline markup put back around the right words
(docs/documents.md).

    from mt import Translator
    from mt.document import translate_document
    translate_document(Translator.load("runs/m30k"), "<p>Ein <b>Hund</b> rennt.</p>", "html")

A Document is a text made ready: `inputs`, the sentences the model translates (with their
alignments when `marked`: something is to be put back); `render` assembles their
translations. mt serve gathers the inputs of many documents into one batch this way.
"""

from __future__ import annotations

import html
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from mt.document import markdown, markup, srt
from mt.document.markup import Block
from mt.document.paragraph import Paragraph, Settings
from mt.document.placeholders import compile_keep
from mt.glossary import Glossary, GlossaryLike, as_glossary
from mt.records import Translation
from mt.translator import CHUNK_LINES, Translator, glossaries_mismatch

FORMATS = ("text", "html", "md", "srt")  # what a document is written in
EXTENSIONS = {".txt": "text", ".text": "text", ".html": "html", ".htm": "html", ".xhtml": "html",
              ".md": "md", ".markdown": "md", ".srt": "srt"}

__all__ = ["EXTENSIONS", "FORMATS", "Document", "DocumentTranslation", "align_options",
           "compile_keep", "parse", "settings", "translate_document", "translate_inputs",
           "translate_lines"]


@dataclass
class DocumentTranslation:
    text: str  # the translated document
    # each sentence as the model saw it (placeholders out), with its translation
    sentences: list[tuple[str, Translation]] = field(default_factory=list)
    cut: int = 0  # sentence pieces from sentences too long for the model, cut to fit
    notes: list[str] = field(default_factory=list)  # what was not well-formed


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
            settings = Settings(settings.lang, False, settings.too_long, settings.keep, escape)
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


def settings(translator: Translator, keep: Sequence[re.Pattern] = ()) -> Settings:
    """How a translator's documents are read: its source language's sentence splitter, its
    longest source (model.max_positions, less a tag's token), and keep."""
    room = translator.max_src - bool(translator.decode_cfg.tag)

    def too_long(sentence: str) -> bool:  # a token is at least a character, less a mark
        return len(sentence) >= room and len(translator.src_tok.tokenize(sentence)) > room

    return Settings(translator.run.cfg.data.src_lang, True, too_long, tuple(keep))


def align_options(translator: Translator, documents: Iterable[Document]) -> dict:
    """The decoding options that documents need: alignments, where something is to be put
    back and the engine gives them (else the words are taken to follow in order)."""
    marked = any(d.marked for d in documents)
    return {"align": True} if marked and translator.model is not None else {}


def translate_inputs(translator: Translator, documents: Sequence[Document],
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


def translate_document(translator: Translator, text: str, format: str = "text",
                       keep: Sequence[str] = (), name: str = "document", **decode
                       ) -> DocumentTranslation:
    """text (a FORMAT: plain text, HTML, Markdown, .srt subtitles) translated: split into
    sentences, placeholders and keep's patterns (regular expressions) left as they are, markup
    put back. name: the document's, for errors. decode: decoding options, as for
    Translator.translate."""
    doc = Document(text, format, settings(translator, compile_keep(keep)), name)
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
