""".docx documents (mt/document/docx.py): a Word file built here with python-docx, its
paragraphs, table cells and header translated by fake translations (the words kept, reversed),
opened again: the same paragraphs, the runs' formatting around the aligned words, hyperlinks,
tabs, fields and bookmarks once each, nothing else changed; a damaged file is one line. With
the tiny model: `mt translate --doc-format docx`."""

from __future__ import annotations

import copy
import io
import os
import re
import subprocess
import sys
import zipfile

import pytest
from document_fakes import identity, reversed_words
from zip_bombs import bomb_docx

from conftest import ROOT, assert_user_error
from mt.config import DecodeConfig
from mt.document import Document, translate_document
from mt.document.docx import W
from mt.document.paragraph import Settings
from mt.errors import DataError
from mt.vocab import SPECIALS, Vocab

docx = pytest.importorskip("docx")

LINK = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink"


def build() -> bytes:
    """A document with what Word writes: formatted runs, a hyperlink, a tab and a break, a
    field, a bookmark, a table (a merged cell), an empty paragraph and a header."""
    d = docx.Document()
    d.add_heading("A short title here.", 1)
    p = d.add_paragraph("We saw ")
    p.add_run("two red").bold = True
    p.add_run(" dogs and ")
    p.add_run("one cat").italic = True
    p.add_run(". They ran home.")
    p = d.add_paragraph("Name:\tAnna Smith")
    p.runs[0].add_break()
    p.add_run("lives here.")
    p = d.add_paragraph("Read the ")
    r_id = d.part.relate_to("https://example.org/", LINK, is_external=True)
    link = p._p.makeelement(W + "hyperlink", {
        "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id": r_id})
    run = copy.deepcopy(p.runs[0]._r)
    run.find(W + "t").text = "whole guide"
    link.append(run)
    p._p.append(link)
    p.add_run(" now, page ")
    for kind, text in (("begin", None), (None, " PAGE "), ("separate", None), (None, "1"),
                       ("end", None)):
        r = p.add_run()
        if kind:
            r._r.append(r._r.makeelement(W + "fldChar", {W + "fldCharType": kind}))
        elif text == " PAGE ":
            instr = r._r.makeelement(W + "instrText", {})
            instr.text = text
            r._r.append(instr)
        else:
            r.text = text
    p.add_run(" of it.")
    p._p.insert(2, p._p.makeelement(W + "bookmarkStart", {W + "id": "0", W + "name": "here"}))
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "First cell text."
    table.cell(0, 1).paragraphs[0].add_run("Bold cell.").bold = True
    table.cell(1, 0).merge(table.cell(1, 1)).text = "Merged cell text."
    d.add_paragraph("")
    d.sections[0].header.paragraphs[0].text = "Header text here."
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def translate(data: bytes, fake) -> tuple[object, Document]:
    doc = Document(data, "docx", Settings("en"))
    done = doc.render(fake(doc.inputs))
    return docx.Document(io.BytesIO(done.data)), doc


def runs(paragraph) -> list[tuple[str, bool | None, bool | None]]:
    return [(r.text, r.bold, r.italic) for r in paragraph.runs]


def all_paragraphs(d) -> list:
    cells = [c for t in d.tables for row in t.rows for c in row.cells]
    return d.paragraphs + [p for c in dict.fromkeys(cells) for p in c.paragraphs]


def test_the_words_kept_give_the_same_text_formatting_and_structure():
    data = build()
    out, doc = translate(data, identity)
    before = docx.Document(io.BytesIO(data))
    assert [p.text for p in all_paragraphs(out)] == [p.text for p in all_paragraphs(before)]
    assert runs(out.paragraphs[1]) == [("We saw ", None, None), ("two red", True, None),
                                       (" dogs and ", None, None), ("one cat", None, True),
                                       (". They ran home.", None, None)]
    assert out.paragraphs[0].style.name == "Heading 1"
    assert out.sections[0].header.paragraphs[0].text == "Header text here."
    assert len(out.tables[0].rows) == 2 and out.tables[0].cell(1, 0).text == "Merged cell text."
    # what is not a paragraph's text is as it was: styles, settings, relationships
    with zipfile.ZipFile(io.BytesIO(data)) as a, zipfile.ZipFile(io.BytesIO(doc.render(
            identity(doc.inputs)).data)) as b:
        assert a.namelist() == b.namelist()
        for name in a.namelist():
            if name not in ("word/document.xml", "word/header1.xml"):
                assert a.read(name) == b.read(name), name


def test_reversed_words_move_the_formatting_with_them_and_keep_every_part_once():
    out, doc = translate(build(), reversed_words)
    assert len(out.paragraphs) == 5 and len(doc.inputs) == 9
    assert runs(out.paragraphs[1]) == [("CAT. ONE", None, True), (" AND DOGS ", None, None),
                                       ("RED TWO", True, None),
                                       (" SAW WE HOME. RAN THEY", None, None)]
    tab = out.paragraphs[2]
    assert tab.text.count("\t") == 1 and tab.text.count("\n") == 1 and "  " not in tab.text
    p = out.paragraphs[3]._p
    assert len(p.findall(W + "hyperlink")) == 1 and "GUIDE WHOLE" in "".join(
        t.text for t in p.find(W + "hyperlink").iter(W + "t"))
    assert len(list(p.iter(W + "bookmarkStart"))) == 1
    fields = [c.get(W + "fldCharType") for c in p.iter(W + "fldChar")]
    assert fields == ["begin", "separate", "end"]
    assert [t.text for t in p.iter(W + "instrText")] == [" PAGE "]
    assert out.tables[0].cell(0, 1).paragraphs[0].runs[0].bold
    assert out.sections[0].header.paragraphs[0].text == "HERE. TEXT HEADER"


def test_a_docx_through_translate_document_and_marks_in_the_text_are_text():
    d = docx.Document()
    d.add_paragraph("Odd \ue000 marks \ue0010\ue003 stay out.")
    data = io.BytesIO()
    d.save(data)

    class Fake:  # what translate_document asks of a Translator
        decoding = DecodeConfig(ignore_starters=True)
        run = type("Run", (), {"cfg": type("Cfg", (), {"data": type("D", (), {
            "src_lang": "en", "tgt_lang": "de"})()})(), "src_vocab": Vocab([*SPECIALS, "7"]),
            "checkpoint": None, "step": 0})()
        max_src, model = 256, None

        def check_options(self, **options):
            return self.decoding

        def translate_nbest(self, lines, **options):
            return [[t] for t in identity(lines)]

    done = translate_document(Fake(), data.getvalue(), "docx")
    text = docx.Document(io.BytesIO(done.data)).paragraphs[0].text
    assert text.split() == done.text.split() == "Odd marks 0 stay out.".split()


@pytest.mark.parametrize("data, message", [
    (b"just text", "in.docx: not a .docx file (not a zip archive)"),
    (b"PK\x03\x04 cut short", "in.docx: a damaged .docx file"),
    (None, "in.docx: a damaged .docx file"),  # a zip, but no Word document in it
])
def test_a_damaged_docx_is_one_line(data, message, cli, tmp_path):
    if data is None:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("hello.txt", "hi")
        data = buf.getvalue()
    with pytest.raises(DataError, match=re.escape(message)):
        Document(data, "docx", Settings("en"), "in.docx")
    src, out = tmp_path / "in.docx", tmp_path / "out.docx"
    src.write_bytes(data)
    r = cli("translate", tmp_path / "no-run", "-i", src, "-o", out, "--doc-format", "auto")
    assert r.code == 4 and "in.docx: " in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not out.exists()


def test_a_zip_bomb_is_refused_in_one_line_before_the_model_loads(cli, tmp_path):
    src, out = tmp_path / "in.docx", tmp_path / "out.docx"
    src.write_bytes(bomb_docx(200 << 20))  # about 240 KB
    r = cli("translate", tmp_path / "no-run", "-i", src, "-o", out, "--doc-format", "docx")
    assert_user_error(r, 4, "in.docx: its part word/document.xml inflates",
                      "to 209,715,200, more than 100 times: a zip bomb")
    assert not out.exists()


INFLATE = """
import resource, sys
import docx  # noqa: F401 (its import is not what is measured)
from mt.document import Document
from mt.document.paragraph import Settings
from mt.errors import DataError
data = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    Document(data, "docx", Settings("en"), "in.docx")
except DataError as e:
    print(e)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10)  # KiB -> MiB
"""


@pytest.mark.slow  # a fresh interpreter each, which imports python-docx
@pytest.mark.parametrize("declared, message", [
    (None, "a zip bomb, not read"),
    # a part that declares 1,000 bytes, with their CRC: zipfile's read() would inflate the
    # whole part before cutting it there; read a block at a time, a byte more fails the CRC
    (1000, "a damaged .docx file (Bad CRC-32 for file 'word/document.xml')"),
])
def test_a_zip_bomb_costs_no_memory(tmp_path, declared, message):
    """The process's peak memory grows by a few MiB, not the 200 MB the part inflates to."""
    src = tmp_path / "in.docx"
    src.write_bytes(bomb_docx(200 << 20, declared))
    r = subprocess.run([sys.executable, "-c", INFLATE, src], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    error, grown = r.stdout.splitlines()
    assert message in error and int(grown) < 50, r.stdout


def test_without_python_docx_the_extra_is_named(monkeypatch, cli, tmp_path):
    import builtins

    real = builtins.__import__

    def no_docx(name, *args, **kwargs):
        if name == "docx":
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_docx)
    src = tmp_path / "in.docx"
    src.write_bytes(build())
    r = cli("translate", tmp_path / "no-run", "-i", src, "--doc-format", "docx")
    assert r.code == 3 and "pip install 'mt[docx]'" in r.err, r.err


def test_mt_translate_a_docx_with_the_tiny_model(cli, tmp_path, tiny_run):
    from conftest import TWO_LINES

    first, second = TWO_LINES.splitlines()
    d = docx.Document()
    p = d.add_paragraph("Yesterday we saw ")
    p.add_run("forty two").bold = True
    p.add_run(" red dogs. ")
    p.add_run(second).italic = True
    d.add_table(rows=1, cols=1).cell(0, 0).text = second
    d.add_paragraph("")
    src, out = tmp_path / "in.docx", tmp_path / "out.docx"
    d.save(src)
    r = cli("translate", tiny_run, "-i", src, "-o", out, "--doc-format", "auto")
    assert r.code == 0 and r.out == "", r.err
    a, b = cli("translate", tiny_run, stdin=TWO_LINES.encode()).out.splitlines()
    got = docx.Document(out)
    assert len(got.paragraphs) == len(d.paragraphs) == 2
    assert got.paragraphs[0].text == f"{a} {b}" and got.tables[0].cell(0, 0).text == b
    bold = [r.text for r in got.paragraphs[0].runs if r.bold]
    italic = [r.text for r in got.paragraphs[0].runs if r.italic]
    # most characters are italic: that is the paragraph's base, which the spaces between
    # the other runs take
    assert len(bold) == 1 and bold[0] in a and "".join(italic).strip() == b
