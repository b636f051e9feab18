"""The `po` document format: untranslated entries translated and marked, all else kept."""

import shutil
import subprocess

import pytest
from document_fakes import identity, reversed_words
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_l10n_po import DATA, real_po

from mt.document import translate_document, translate_inputs
from mt.document.document import Document
from mt.document.paragraph import Paragraph, Settings
from mt.l10n import po
from mt.l10n.format_strings import unkept
from mt.records import Translation
from mt.translator import Translator

ORIGIN = "toy/best.pt, step 10"
msgfmt = pytest.mark.skipif(shutil.which("msgfmt") is None, reason="needs gettext's msgfmt")


def translated(text: str, target: str, fake=reversed_words, overwrite: bool = False) -> str:
    doc = Document(text, "po", Settings("en", target=target, overwrite=overwrite,
                                        origin=ORIGIN))
    return doc.render(fake(doc.inputs)).text


def check(path) -> None:
    r = subprocess.run(["msgfmt", "--check", "--use-fuzzy", "-o", "/dev/null", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def blanked(text: str, every: int = 2) -> tuple[str, set[int]]:
    """A real file with every `every`-th entry's translation taken out, and their indexes."""
    catalog = po.read(text, "real")
    out, done, blank = [], 0, set()
    for i, e in enumerate(catalog.entries):
        if i % every == 0 and not e.po.obsolete:
            n = len(e.po.msgstr_plural) if e.po.msgid_plural else 1
            out += [text[done:e.start], po.rewrite(catalog, e, [""] * n)]
            done, _ = e.end, blank.add(i)
    return "".join(out) + text[done:], blank


@pytest.mark.parametrize("lang", ["de", "ru", "ja"])
def test_a_pot_becomes_the_golden_po_of_each_language(lang):
    """Plurals (2, 3 and 1 forms), msgctxt, flags, a fuzzy and an obsolete entry, the header."""
    out = translated((DATA / "demo.pot").read_text(encoding="utf-8"), lang)
    assert out == (DATA / f"demo.{lang}.po").read_text(encoding="utf-8")


@msgfmt
@pytest.mark.parametrize("lang", ["de", "ru", "ja"])
def test_the_golden_files_pass_msgfmt_check(lang):
    check(DATA / f"demo.{lang}.po")


def test_translated_entries_are_kept_unless_overwrite():
    source = (DATA / "corpus.ru.po").read_text(encoding="utf-8")
    out = po.read(translated(source, "ru"), "out")
    assert [e.po.msgstr for e in out.entries[:2]] == ["Открыть %s", "Файл"]
    assert out.entries[5].po.msgstr == "TRANSLATED YET NOT"
    assert out.entries[4].po.msgstr == "Кошка"  # fuzzy: a human's, kept
    every = po.read(translated(source, "ru", overwrite=True), "out")
    assert every.entries[0].po.msgstr == "OPEN %s" and every.entries[4].po.msgstr == "CAT BLACK A"
    assert every.entries[6].po.msgstr == "Старая строка"  # obsolete: never
    assert every.entries[3].po.msgstr_plural == {k: "%d FILES" for k in range(3)}
    assert every.text.startswith(source[:source.index("#: src")])  # the header: as it was


class Directives:
    """A translator that writes each directive back, or drops those of "Close" (a model
    that has not learned them), and says what it was given."""

    model = None  # no alignments: the words are taken to follow in order
    WORDS = {"Open": "Öffne", "Close": "Schließe", "now": "jetzt"}

    def __init__(self):
        self.calls = []

    def translate_nbest(self, inputs, **decode):
        self.calls.append(list(inputs))
        out = []
        for x in inputs:
            words = [self.WORDS.get(w, w) for w in x.split()]
            if words[0] == "Schließe":
                words = [w for w in words if "%" not in w]
            out.append([Translation(" ".join(words), 0.0)])
        return out


def test_a_directive_is_left_to_the_model_unless_its_translation_loses_it():
    """Soft directives (mt.document.settings): a c-format entry's directives reach the model,
    which places them itself; an entry whose translation loses one (or changes its order, or
    adds a directive) is translated again without them, and they are put back."""
    pot = ('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
           '#, c-format\nmsgid "Open %s now"\nmsgstr ""\n\n'
           '#, c-format\nmsgid "Close %s now"\nmsgstr ""\n')
    fake = Directives()
    doc = Document(pot, "po", Settings("en", target="de", origin=ORIGIN, soft=True))
    out = po.read(doc.render(translate_inputs(fake, [doc])).text, "out").entries
    assert fake.calls == [["Open %s now", "Close %s now"], ["Close now"]]
    assert out[0].po.msgstr == "Öffne %s jetzt"  # as the model wrote it
    assert unkept("Close %s now", out[1].po.msgstr, ["c-format"]) == []  # put back
    assert out[1].po.msgstr.replace("%s", "").split() == ["Schließe", "jetzt"]
    p = Paragraph("Open %s with %d", Settings("en", soft=True), spans=[(5, 7), (13, 15)])
    assert p.inputs == ["Open %s with %d"] and p.required == [["%s", "%d"]]
    for text, kept in [("%s mit %d", True), ("%d mit %s", False), ("%s mit %s %d", False),
                       ("%s mit {x} %d", False), ("%s mit", False)]:
        assert p.keeps([Translation(text, 0.0)]) is kept, text
    assert not Paragraph("Open %s", Settings("en"), spans=[(5, 7)]).required[0]  # hard


@msgfmt
@pytest.mark.parametrize("lang, package", [("de", "grep"), ("de", "pg_test_fsync-15"),
                                           ("ru", "grep")])
def test_every_entry_not_translated_comes_back_byte_for_byte(tmp_path, lang, package):
    text = real_po(tmp_path, lang, package).read_text(encoding="utf-8")
    source, blank = blanked(text)
    out = tmp_path / "out.po"
    out.write_text(translated(source, lang, identity), encoding="utf-8")
    check(out)
    before, after = po.read(source, "in"), po.read(out.read_text(encoding="utf-8"), "out")
    assert before.text[:before.header.end] == after.text[:after.header.end]
    for i, (a, b) in enumerate(zip(before.entries, after.entries, strict=True)):
        if i in blank:
            assert b.translated and "fuzzy" in b.po.flags and b.po.msgid == a.po.msgid
        else:
            assert after.text[b.start:b.end] == before.text[a.start:a.end]


def test_a_po_file_given_as_lines_is_translated_so_with_a_hint(cli, tiny_run, tmp_path):
    (tmp_path / "in.po").write_text('msgid "Open"\nmsgstr ""\n', encoding="utf-8")
    r = cli("translate", tiny_run, "-i", tmp_path / "in.po", "--threads", "1")
    assert r.code == 0 and len(r.out.splitlines()) == 2  # a line each, as asked
    assert "line by line" in r.err and "--doc-format auto" in r.err and "po document" in r.err
    r = cli("translate", tiny_run, "-i", tmp_path / "in.po", "--doc-format", "auto",
            "--threads", "1")
    assert r.code == 0 and "line by line" not in r.err


def test_a_po_file_through_mt_translate_passes_msgfmt(cli, tiny_run, tmp_path):
    if shutil.which("msgfmt") is None:
        pytest.skip("needs gettext's msgfmt")
    text = real_po(tmp_path, "de", "pg_test_fsync-15").read_text(encoding="utf-8")
    source, blank = blanked(text, every=1)
    (tmp_path / "in.po").write_text(source, encoding="utf-8")
    out = tmp_path / "de.po"
    r = cli("translate", tiny_run, "-i", tmp_path / "in.po", "-o", out, "--doc-format", "po",
            "--threads", "1")
    assert r.code == 0, r.err
    check(out)
    done = po.read(out.read_text(encoding="utf-8"), "out")
    assert all(e.translated and "# mt: " in out.read_text() for e in done.entries)
    for a, b in zip(po.read(text, "in").entries, done.entries, strict=True):
        flags = a.po.flags  # none (msgunfmt's): printf guessed
        for src, tgt in ([(a.po.msgid, b.po.msgstr)] if not a.po.msgid_plural else
                         [(a.po.msgid_plural, b.po.msgstr_plural[1])]):
            assert unkept(src, tgt, flags) == [], (src, tgt)


def test_a_pot_in_gives_a_po_of_the_run_language_out(cli, tiny_run, tmp_path):
    out = tmp_path / "de.po"
    r = cli("translate", tiny_run, "-i", DATA / "demo.pot", "-o", out, "--doc-format", "auto",
            "--threads", "1")
    assert r.code == 0, r.err
    done = po.read(out.read_text(encoding="utf-8"), "de.po")
    assert done.metadata["Language"] == "de"
    assert done.metadata["Plural-Forms"] == "nplurals=2; plural=(n != 1);"
    assert "# mt: tiny/best.pt, step " in done.text
    if shutil.which("msgfmt"):
        check(out)


@pytest.mark.parametrize("name, data, message", [
    ("broken.po", (DATA / "broken.po").read_bytes(),
     r"broken.po:8: PO syntax error \(unescaped double quote found\)"),
    ("grep.po", b"\xde\x12\x04\x95\0\0\0\0", r"grep.po: a compiled gettext catalog \(.mo\), "
                                             r"not a PO file; turn it back into one with "
                                             r"`msgunfmt"),
])
def test_bad_input_is_one_line_exit_4_and_nothing_written(cli, tiny_run, tmp_path, name, data,
                                                          message):
    src, out = tmp_path / name, tmp_path / "out.po"
    src.write_bytes(data)
    r = cli("translate", tiny_run, "-i", src, "-o", out, "--doc-format", "auto", "--threads", "1")
    assert r.code == 4 and len(r.err.strip().splitlines()) == 1, r.err
    assert pytest.importorskip("re").search(message, r.err), r.err
    assert not out.exists()


def msgids(tmp_path) -> list[str]:
    text = real_po(tmp_path, "de", "popt").read_text(encoding="utf-8")
    return [e.po.msgid for e in po.read(text, "popt").entries if not e.po.msgid_plural][:40]


DIRECTIVES = ["%s", "%d", "%5.2f", "%1$s", "%ld", "%%"]


@pytest.fixture(scope="module")
def translator(tiny_run):
    return Translator.load(tiny_run, threads=1)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_placeholders_in_real_msgids_survive_the_toy_model(translator, tmp_path, data):
    ids = msgids(tmp_path)
    words = data.draw(st.sampled_from(ids)).split() or ["x"]
    for d in data.draw(st.lists(st.sampled_from(DIRECTIVES), min_size=1, max_size=3)):
        words.insert(data.draw(st.integers(0, len(words))), d)
    msgid = " ".join(words)
    text = f'#, c-format\nmsgid "{po.quoted("", msgid)[2:-2]}"\nmsgstr ""\n'
    out = translate_document(translator, text, "po", name="random.po").text
    (entry,) = po.read(out, "out").entries
    assert unkept(msgid, entry.po.msgstr, ["c-format"]) == [], (msgid, entry.po.msgstr)


def test_mt_serve_translates_a_po_file_as_mt_translate_does(tiny_run, cli, tmp_path):
    from test_serve_app import post_file

    from benchmarks.bench_serve import Served
    from conftest import THREADS

    source = (DATA / "corpus.ru.po").read_bytes()
    (tmp_path / "in.po").write_bytes(source)
    r = cli("translate", tiny_run, "-i", tmp_path / "in.po", "--doc-format", "po", "--overwrite",
            "--threads", "1")
    assert r.code == 0, r.err
    with Served(tiny_run, env=THREADS) as s:
        status, response, body = post_file(s.url, "format=po&overwrite=true", source)
        assert s.stop() == 0, s.log[-20:]
    assert status == 200, body
    assert response.headers["content-type"] == "text/x-gettext-translation; charset=utf-8"
    assert body.decode() == r.out
    assert po.read(r.out, "out").entries[0].po.msgstr != "Открыть %s"  # overwritten
