"""The registry of document formats (mt.document.formats): the names every surface takes come
from it, and a new format is one module and one registry line (a fake one here, registered by
the test alone, read and written by `mt translate --doc-format`)."""

import pytest

from conftest import TWO_LINES, register
from mt.document import Document
from mt.document.formats import (
    FORMATS,
    DocumentFormat,
    cli_names,
    document_format,
    extensions,
    names,
    text_formats,
)
from mt.document.markup import Block
from mt.document.paragraph import Settings
from mt.errors import ConfigError


def test_the_names_each_surface_takes_come_from_the_registry():
    assert text_formats() == ("text", "html", "md", "srt", "po", "xliff")  # POST /translate's
    # `format`, and POST /translate/document's:
    assert names() == ("text", "txt", "html", "md", "srt", "docx", "po", "xliff", "xlf")
    assert cli_names() == ("auto", "txt", "html", "md", "srt", "docx", "po", "xliff")
    assert list(extensions()) == [".txt", ".text", ".html", ".htm", ".xhtml", ".md",
                                  ".markdown", ".srt", ".docx", ".po", ".pot", ".xlf", ".xliff"]
    assert document_format("txt") is document_format("text")
    with pytest.raises(ConfigError, match="document format 'odt': expected one of text"):
        document_format("odt")


class _Quoted(DocumentFormat):
    """A fake format: lines that begin `> ` are translated, every other line kept."""

    name, extensions = "quoted", (".qt",)

    def parse(self, source: str, name: str) -> tuple[list[str | Block], list[str]]:
        parts: list[str | Block] = []
        for line in source.splitlines(keepends=True):
            text = line.removeprefix("> ").rstrip("\n")
            if line.startswith("> ") and text.strip():
                parts += ["> ", Block(text), line[len(text) + 2:]]
            else:
                parts.append(line)
        return parts, []


@pytest.fixture
def quoted(monkeypatch):
    register(monkeypatch, FORMATS, "quoted", "FORMAT", _Quoted())


def test_a_new_format_is_one_module_and_one_registry_line(quoted, cli, tmp_path, tiny_run):
    first, second = TWO_LINES.splitlines()
    src = tmp_path / "notes.qt"
    src.write_text(f"# {first}\n> {second}\n", encoding="utf-8")
    doc = Document(src.read_text(encoding="utf-8"), "quoted", Settings("en"))
    assert doc.inputs == [second]
    _, b = cli("translate", tiny_run, stdin=TWO_LINES.encode()).out.splitlines()
    for how in ("quoted", "auto"):  # by name, and by the extension it lists
        r = cli("translate", tiny_run, "-i", src, "--doc-format", how, "--threads", "1")
        assert r.code == 0, r.err
        assert r.out == f"# {first}\n> {b}\n"
