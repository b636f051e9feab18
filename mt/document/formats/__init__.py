"""Document formats: what a document is written in, a registry (docs/documents.md#document-formats).

- `text`: plain text, each line a paragraph's line (text.py).
- `html`, `md`, `srt`: HTML, Markdown, SubRip subtitles: text with markup kept as it is.
- `docx`: a Word file, bytes (docx.py; python-docx, the `docx` extra).
- `po`: a gettext PO or POT file, its untranslated entries translated (po.py; mt.l10n.po).
- `xliff`: XLIFF 1.2 and 2.0, the untranslated segments translated (xliff.py).

A format is one module holding a `FORMAT` (a DocumentFormat: its names, file extensions and
content type, whether it is bytes, how it is parsed into paragraphs and written back) and one
line in FORMATS. `mt translate --doc-format`, `mt serve`'s `format` and POST /translate/document
read the names from here; mt.document.Document reads and writes every format through it.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import replace

from mt.document.markup import Block
from mt.document.paragraph import Settings
from mt.errors import ConfigError

FORMATS = {  # a document format's name -> the module whose FORMAT reads and writes it
    "text": "mt.document.formats.text",
    "html": "mt.document.formats.html",
    "md": "mt.document.formats.markdown",
    "srt": "mt.document.formats.srt",
    "docx": "mt.document.formats.docx",
    "po": "mt.document.formats.po",
    "xliff": "mt.document.formats.xliff",
}


class DocumentFormat:
    """What the registry needs of a format. A text format's `source` is a str, a binary one's
    the file's bytes; `parse` gives what is written back as it is (str) and a Block per
    paragraph to translate, `render` puts them back together."""

    name = ""  # its name in FORMATS
    aliases: tuple[str, ...] = ()  # other names it is given by (POST /translate/document)
    cli_name = ""  # the name `mt translate --doc-format` takes; default: name
    extensions: tuple[str, ...] = ()  # file name endings, for `--doc-format auto`
    content_type = "text/plain; charset=utf-8"  # what POST /translate/document answers with
    binary = False  # the source is bytes (a file), not text

    def settings(self, settings: Settings) -> Settings:
        """How its paragraphs are read: a line break is whitespace, as in most formats."""
        return replace(settings, lines=False)

    def parse(self, source, name: str) -> tuple[list[str | Block], list[str]]:
        """What is written back as it is (str) and the Blocks to translate, in order, and notes
        on what was not well-formed; a DataError (name: the document's) for a source that
        cannot be read."""
        raise NotImplementedError

    def read(self, source, name: str, settings: Settings) -> tuple[list[str | Block], list[str]]:
        """parse, given how the document is translated: a format whose parts depend on it (a
        PO file's: the target language's plural forms; PO and XLIFF: decode.overwrite) reads
        it here."""
        return self.parse(source, name)

    def render(self, source, name: str, parts: Sequence[str | Block], pieces: Sequence[str]
               ) -> tuple[str, bytes | None]:
        """The document from parse's parts, each Block's piece its translation (a str part's
        piece: the part): its text, and for a binary format the file."""
        return "".join(pieces), None


def document_format(name: str) -> DocumentFormat:
    """The registered format called `name` (or one of its aliases: "txt" is "text"), its module
    imported on first use; a ConfigError naming the known ones if none."""
    if name not in FORMATS:
        found = next((f.name for f in formats() if name in f.aliases), None)
        if found is None:
            raise ConfigError(f"document format {name!r}: expected one of {', '.join(names())}")
        name = found
    return importlib.import_module(FORMATS[name]).FORMAT


def formats() -> list[DocumentFormat]:
    return [document_format(name) for name in FORMATS]


def text_formats() -> tuple[str, ...]:
    """The names of the formats whose documents are text (a JSON string can hold them)."""
    return tuple(f.name for f in formats() if not f.binary)


def names() -> tuple[str, ...]:
    """Every name a format is given by, each format's aliases after its name."""
    return tuple(n for f in formats() for n in (f.name, *f.aliases))


def cli_names() -> tuple[str, ...]:
    """The names `mt translate --doc-format` takes (and `auto`: by the extension)."""
    return ("auto", *(f.cli_name or f.name for f in formats()))


def extensions() -> dict[str, str]:
    """File name ending (".htm") -> the format's name."""
    return {e: f.name for f in formats() for e in f.extensions}
