"""mt.l10n.po: PO files read into entries that know their place, rewritten by splicing."""

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from mt.errors import DataError
from mt.l10n import po

DATA = ROOT / "tests" / "data" / "po"
LOCALE = Path("/usr/share/locale")


def real_po(tmp_path: Path, lang: str, package: str) -> Path:
    """A real package's translations as a PO file (msgunfmt of its .mo); skipped without."""
    mo = LOCALE / lang / "LC_MESSAGES" / f"{package}.mo"
    if shutil.which("msgunfmt") is None or not mo.exists():
        pytest.skip(f"needs gettext's msgunfmt and {mo}")
    out = tmp_path / f"{package}.{lang}.po"
    subprocess.run(["msgunfmt", str(mo), "-o", str(out)], check=True)
    return out


@pytest.mark.parametrize("package", ["grep", "coreutils"])
def test_each_entry_is_where_its_text_is(tmp_path, package):
    import polib

    catalog = po.read_file(real_po(tmp_path, "de", package))
    assert catalog.header is not None and catalog.metadata["Language"] == "de"
    assert len(catalog.entries) > 100
    for e in catalog.entries:  # its text alone reads as the same entry
        (alone,) = polib.pofile(catalog.text[e.start:e.end] + "\n")
        assert (alone.msgctxt, alone.msgid, alone.msgstr) == (e.po.msgctxt, e.po.msgid,
                                                               e.po.msgstr)
        assert catalog.text[e.msgstr:e.after].lstrip().startswith("msgstr")


def test_comments_flags_context_obsolete_and_plurals_are_placed():
    catalog = po.read_file(DATA / "corpus.ru.po")
    by_id = {(e.po.msgctxt, e.po.msgid): e for e in catalog.entries}
    noun = by_id[("noun", "File")]
    assert catalog.text[noun.start:noun.msgstr] == ('#: src/main.c:21\nmsgctxt "noun"\n'
                                                   'msgid "File"\n')
    plural = by_id[(None, "%d file")]
    assert catalog.text[plural.msgstr:plural.after].count("msgstr[") == 3
    old = by_id[(None, "Old string")]
    assert old.po.obsolete and catalog.text[old.start:old.end].startswith("#~ msgid")
    assert [e.translated for e in catalog.entries] == [True] * 5 + [False, True]


def test_a_rewritten_entry_keeps_its_other_lines_and_the_file_the_rest():
    catalog = po.read_file(DATA / "corpus.ru.po")
    e = catalog.entries[0]
    new = po.rewrite(catalog, e, ["Открыть %s\nснова"], "mt: x/best.pt (machine translation)",
                     fuzzy=True)
    assert new == ('# mt: x/best.pt (machine translation)\n#: src/main.c:10\n'
                   '#, c-format, fuzzy\nmsgid "Open %s"\nmsgstr ""\n"Открыть %s\\n"\n'
                   '"снова"\n\n')
    again = po.rewrite(po.read(new, "x"), po.read(new, "x").entries[0], ["y"],
                       "mt: y/best.pt (machine translation)", fuzzy=True)
    assert again.count("# mt:") == 1 and again.count("fuzzy") == 1  # replaced, not added


def test_a_header_with_the_fields_comes_back_as_it_was_and_one_without_them_gets_them():
    catalog = po.read_file(DATA / "corpus.ru.po")
    h = catalog.header
    same = {k: catalog.metadata[k] for k in ("Language", "Plural-Forms")}
    assert po.with_header(catalog, same) == catalog.text[h.start:h.end]
    pot = po.read_file(DATA / "demo.pot")
    header = po.read(po.with_header(pot, {"Language": "ja", "X-New": "1"}), "h")
    assert header.header is not None
    assert header.metadata["Language"] == "ja" and header.metadata["X-New"] == "1"
    assert header.metadata["Project-Id-Version"] == "demo 1.0"
    none = po.read('msgid "a"\nmsgstr ""\n', "n")
    made = po.read(po.with_header(none, {"Language": "de"}) + none.text, "made")
    assert made.metadata == {"Language": "de"} and len(made.entries) == 1


def test_a_syntax_error_names_the_file_and_line():
    with pytest.raises(DataError, match=r"^\S*broken.po:8: PO syntax error \(unescaped double "
                                        r"quote found\)"):
        po.read_file(DATA / "broken.po")


def test_a_mo_file_is_refused_with_msgunfmt_named(tmp_path):
    mo = tmp_path / "x.mo"
    mo.write_bytes(b"\xde\x12\x04\x95" + b"\0" * 24)
    with pytest.raises(DataError, match=r"x.mo: a compiled gettext catalog \(.mo\), not a PO "
                                        r"file; turn it back into one with `msgunfmt"):
        po.read_file(mo)


def test_a_document_text_is_never_opened_as_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "secret").write_text('msgid "leaked"\nmsgstr "x"\n', encoding="utf-8")
    with pytest.raises(DataError, match="request:1: PO syntax error"):  # the text, not the file
        po.read("secret", "request")


def test_the_header_charset_decodes_the_file(tmp_path):
    f = tmp_path / "latin1.po"
    f.write_bytes('msgid ""\nmsgstr "Content-Type: text/plain; charset=ISO-8859-1\\n"\n\n'
                  'msgid "Open"\nmsgstr "Öffnen"\n'.encode("latin-1"))
    assert po.read_file(f).entries[0].po.msgstr == "Öffnen"
    f.write_bytes(f.read_bytes().replace(b"ISO-8859-1", b"UTF-8"))
    with pytest.raises(DataError, match="not UTF-8, as its header says"):
        po.read_file(f)


@pytest.mark.parametrize("lang, nplurals, singular, one, other", [
    ("de", 2, 0, 0, 1), ("ru", 3, None, 0, 2), ("ja", 1, None, 0, 0), ("pl", 3, 0, 0, 2)])
def test_plural_forms_come_from_babel(lang, nplurals, singular, one, other):
    forms = po.for_language(lang)
    assert (forms.nplurals, forms.singular, forms.one, forms.other) == (nplurals, singular,
                                                                       one, other)
    assert po.parse_plural_forms(str(forms)) == forms


def test_a_plural_forms_header_mt_cannot_read_is_a_data_error():
    with pytest.raises(DataError, match="x.po: a Plural-Forms header 'nplurals=INTEGER"):
        po.parse_plural_forms("nplurals=INTEGER; plural=EXPRESSION;", "x.po")
