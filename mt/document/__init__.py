"""Real text through a Translator: paragraphs split into sentences and put back together,
placeholders kept out of the model's sight, inline markup put back around the right words
(docs/documents.md).

    from mt import Translator
    from mt.document import translate_document
    translate_document(Translator.load("runs/m30k"), "<p>Ein <b>Hund</b> rennt.</p>", "html")

A Document (mt.document.document) is a text, or a .docx file's bytes, in a format of the
registry (mt.document.formats) made ready: `inputs`, the sentences the model translates;
`render` assembles their translations. Documents gathers the inputs of many documents into
one batch and puts the translations back: `mt translate` and `mt serve` both go through it.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence

from mt.config import DecodeConfig
from mt.document.document import Document, DocumentTranslation, decode_text
from mt.document.formats import FORMATS, document_format, extensions
from mt.document.paragraph import Settings
from mt.document.placeholders import compile_keep
from mt.document.starters import starts_sentence
from mt.glossary import Glossary, GlossaryLike, as_glossary
from mt.memory.match import Match
from mt.records import Translation
from mt.translator import CHUNK_LINES, Translator, glossaries_mismatch, reused

__all__ = ["FORMATS", "Document", "DocumentTranslation", "Documents", "compile_keep",
           "decode_text", "document_format", "format_of_path", "settings",
           "translate_document", "translate_inputs", "translate_lines"]


class Documents:
    """Documents translated together: their inputs as one list of sentences, the decoding
    options they need, and each document put back from its share of the translations."""

    def __init__(self, docs: Sequence[Document]):
        self.docs = list(docs)

    @property
    def inputs(self) -> list[str]:  # the documents' own: harden changes them
        return [x for d in self.docs for x in d.inputs]

    @classmethod
    def read(cls, texts: Sequence[str | bytes], format: str, settings: Settings,
             names: Sequence[str]) -> Documents:
        """texts as Documents of a format; a DataError naming the one that is not in it."""
        return cls([Document(t, format, settings, n) for t, n in zip(texts, names, strict=True)])

    def options(self, translator: Translator) -> dict:
        """The decoding options the documents need: alignments, where something is to be put
        back and the engine gives them (else the words are taken to follow in order)."""
        marked = any(d.marked for d in self.docs)
        return {"align": True} if marked and translator.model is not None else {}

    def per_input(self, values: Sequence) -> list:
        """One value per document (its glossary) as one per input."""
        return [v for d, v in zip(self.docs, values, strict=True) for _ in d.inputs]

    def shares(self, found: Sequence) -> Iterator[tuple[Document, Sequence]]:
        """Each document with its share of found (one item per input, in order)."""
        done = 0
        for d in self.docs:
            yield d, found[done:done + len(d.inputs)]
            done += len(d.inputs)

    def harden(self, found: Sequence[Translation | None]) -> list[Translation | None]:
        """Given one translation per input: each document's paragraphs that lost a directive
        left to the model made again without it (Document.harden); the translations, None
        for each input to translate now."""
        return [t for d, mine in self.shares(found) for t in d.harden(mine)]

    def render(self, found: Sequence[Translation]) -> Iterator[DocumentTranslation]:
        """Each document from one translation per input, in order."""
        return (d.render(mine) for d, mine in self.shares(found))


def format_of_path(path: str) -> str | None:
    """The format a file's name says (its extension, by the registry's), or None."""
    ext = "." + path.rpartition(".")[2].lower() if "." in path else ""
    return extensions().get(ext)


def settings(translator: Translator, keep: Sequence[re.Pattern] = (),
             cfg: DecodeConfig | None = None) -> Settings:
    """How a translator's documents are read with its decoding options (cfg; None: its own):
    its source language's sentence splitter (and its run's sentence starters, unless
    decode.ignore_starters), its longest source (model.max_positions, less a tag's token),
    keep, and the placeholder kinds decode.mask takes out of the sentences: numbers only for
    a model that has seen digits (`reads_digits`); its target language, decode.overwrite and
    its origin (`origin`), for formats that record them (PO)."""
    cfg = cfg or translator.decoding
    room = translator.max_src - bool(cfg.tag)

    def too_long(sentence: str) -> bool:  # a token is at least a character, less a mark
        return len(sentence) >= room and len(translator.src_tok.tokenize(sentence)) > room

    starters = [] if cfg.ignore_starters else translator.run.starters
    begins = starts_sentence(starters, translator.src_tok.tokenize) if starters else None
    masked = tuple(k for k in cfg.masked if k != "number" or reads_digits(translator))
    data = translator.run.cfg.data
    reuse = None
    if cfg.memory and cfg.memory_exact == "reuse":
        reuse = functools.partial(stored, translator, cfg)
    return Settings(data.src_lang, True, too_long, tuple(keep), str, begins, masked,
                    data.tgt_lang, cfg.overwrite, origin(translator), reuse, soft=True)


def stored(translator: Translator, cfg: DecodeConfig, text: str) -> Match | None:
    """text's match in decode.memory whose target is used as it is (at or above
    decode.memory_reuse: 100, exact); None where it has none."""
    match = translator.matches([text], cfg)[0]
    return match if reused(match, cfg) else None


def origin(translator: Translator) -> str:
    """What made a translator's translations, as a PO comment names it: its checkpoint (the
    run's directory and file, no more of its path: a server's documents do not show its
    disk) and step."""
    ckpt = translator.run.checkpoint
    where = f"{ckpt.parent.name}/{ckpt.name}" if ckpt is not None else "a model"
    return f"{where}, step {translator.run.step}"


def reads_digits(translator: Translator) -> bool:
    """Whether the model's source vocabulary holds a token with a digit. One that never saw a
    digit (the toy model) writes a filler where a number was taken out ("Ich brauche 25 ich
    Bücher."): its numbers stay in, and mt.unknowns copies each where it wrote for it."""
    return translator.run.src_vocab.has_digits


def _settings(translator: Translator, keep: Sequence[str], decode: dict) -> Settings:
    """settings with keep's patterns compiled and the decoding options among decode (the
    others, a glossary, go to the Translator's call)."""
    options = {k: v for k, v in decode.items() if k in DecodeConfig.__dataclass_fields__}
    return settings(translator, compile_keep(keep), translator.check_options(**options))


def translate_inputs(translator: Translator, documents: Sequence[Document],
                     glossaries: Sequence[Glossary | None] | None = None, **decode
                     ) -> list[Translation]:
    """The best translation of each input of the documents, in order; with its word alignment
    where the document needs one (asked for those sentences only: it costs one more
    teacher-forced pass of the decoder) and the engine gives them. glossaries: each
    document's own glossary (added to decode's `glossary` for its sentences), or None."""
    batch = Documents(documents)
    out: list[Translation | None] = [None] * len(batch.inputs)
    for _ in range(2):  # again for the paragraphs that lost a placeholder left in (harden)
        inputs = batch.inputs
        aligned = [x and translator.model is not None for d in documents for x in d.aligned]
        own = None if glossaries is None else batch.per_input(glossaries)
        for want in (False, True):
            rows = [i for i, x in enumerate(aligned) if x == want and out[i] is None]
            if rows:
                more = {} if own is None else {"glossaries": [own[i] for i in rows]}
                found = translator.translate_nbest(
                    [inputs[i] for i in rows], **more,
                    **{**decode, **({"align": True} if want else {})})
                for i, f in zip(rows, found, strict=True):
                    out[i] = f[0]
        out = batch.harden(out)
    return out


def translate_document(translator: Translator, text: str | bytes, format: str = "text",
                       keep: Sequence[str] = (), name: str = "document", **decode
                       ) -> DocumentTranslation:
    """text (in a format of FORMATS: plain text, HTML, Markdown, .srt subtitles, XLIFF; or
    "docx" and the file's bytes) translated: split into sentences, placeholders and keep's
    patterns (regular expressions) left as they are, markup (a .docx: its runs' formatting)
    put back. name: the document's, for errors. decode: decoding options, as for
    Translator.translate (decode.overwrite: a localization file's translated entries
    translated again). A binary format's file comes back as the DocumentTranslation's
    `data`."""
    doc = Document(text, format, _settings(translator, keep, decode), name)
    return doc.render(translate_inputs(translator, [doc], **decode))


def translate_lines(translator: Translator, lines: Iterable[str], keep: Sequence[str] = (),
                    glossaries: Iterable[GlossaryLike] | None = None,
                    **decode) -> Iterator[DocumentTranslation]:
    """Each line a paragraph of plain text, translated as translate_document does, in order,
    a chunk of lines at a time (the translator's chunk_lines). glossaries: each line's own
    glossary (None for none; as Translator.translate takes them), read as far as the lines
    are."""
    ready = _settings(translator, keep, decode)
    it, own, read = iter(lines), None if glossaries is None else iter(glossaries), 0
    while chunk := list(itertools.islice(it, translator.chunk_lines or CHUNK_LINES)):
        batch = Documents([Document(line, "text", ready) for line in chunk])
        mine = None
        if own is not None:
            mine = [as_glossary(g, f"glossaries[{n}]")
                    for n, g in enumerate(itertools.islice(own, len(chunk)), read)]
            if len(mine) != len(chunk):
                raise glossaries_mismatch(read + len(chunk), read + len(mine))
        read += len(chunk)
        yield from batch.render(translate_inputs(translator, batch.docs, mine, **decode))
