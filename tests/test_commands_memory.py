"""`mt memory add / search / export / info` as a user runs them: files of every kind in, TMX
out and back (and read by translate-toolkit), concurrent adds, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT

PO = """msgid ""
msgstr ""
"Language: de\\n"
"Content-Type: text/plain; charset=UTF-8\\n"

msgid "Save the file"
msgstr "Datei speichern"

msgid "Quit <now> & \\"then\\""
msgstr "Jetzt <beenden> & \\"dann\\""

msgid "Untranslated"
msgstr ""
"""

TMX = """<?xml version="1.0" encoding="utf-8"?>
<tmx version="1.4"><header srclang="en-US" datatype="plaintext" segtype="sentence"
 adminlang="en" creationtool="t" creationtoolversion="1" o-tmf="t"/><body>
<tu><tuv xml:lang="en-US"><seg>Open the window</seg></tuv>
<tuv xml:lang="de-DE"><seg>Fenster öffnen</seg></tuv></tu>
</body></tmx>
"""


@pytest.fixture
def files(tmp_path):
    (tmp_path / "a.po").write_text(PO, encoding="utf-8")
    (tmp_path / "b.tmx").write_text(TMX, encoding="utf-8")
    (tmp_path / "c.tsv").write_text("Close the window\tFenster schließen\n"
                                    "Save the file\tDatei speichern\n", encoding="utf-8")
    (tmp_path / "d.jsonl").write_text('{"en": "Print the page", "de": "Seite drucken"}\n',
                                      encoding="utf-8")
    (tmp_path / "e.en").write_text("Copy the text\n", encoding="utf-8")
    (tmp_path / "e.de").write_text("Text kopieren\n", encoding="utf-8")
    return tmp_path


def add(cli, memory, *files, src="en", tgt="de"):
    return cli("memory", "add", memory, *files, "--src", src, "--tgt", tgt)


def test_add_every_kind_of_file_then_search_export_and_add_back(cli, files, tmp_path):
    m = tmp_path / "m.db"
    r = add(cli, m, *(files / n for n in ("a.po", "b.tmx", "c.tsv", "d.jsonl", "e")))
    assert r.code == 0, r.err
    assert json.loads(r.out) == {"memory": str(m), "added": 6, "duplicates": 1, "pairs": 6}
    r = cli("memory", "search", m, "save the file", "--k", "2", "--json")
    found = json.loads(r.out)
    # then three pairs of 2 words in 3 changed: the latest added wins the tie
    assert [(f["target"], f["score"]) for f in found] == [("Datei speichern", 99.0),
                                                         ("Text kopieren", 33.33)]
    assert "99.00%  Save the file" in cli("memory", "search", m, "save the file").out
    about = json.loads(cli("memory", "info", m, "--json").out)
    assert (about["pairs"], about["src"], about["tgt"], about["store"]) == (6, "en", "de",
                                                                           "sqlite")
    out = tmp_path / "out.tmx"
    assert cli("memory", "export", m, "--to", "tmx", "-o", out).code == 0
    again = tmp_path / "again.db"
    assert add(cli, again, out).code == 0
    assert cli("memory", "export", again, "--to", "tsv", "-o", "-").out == \
        cli("memory", "export", m, "--to", "tsv", "-o", "-").out
    assert 'Quit <now> & "then"\tJetzt <beenden> & "dann"\n' in \
        cli("memory", "export", m, "--to", "tsv", "-o", "-").out


def test_the_tmx_export_reads_in_translate_toolkit(cli, files, tmp_path):
    from translate.storage import tmx

    m, out = tmp_path / "m.db", tmp_path / "out.tmx"
    add(cli, m, files / "a.po")
    cli("memory", "export", m, "--to", "tmx", "-o", out)
    store = tmx.tmxfile(out.read_bytes())
    assert [(u.source, u.target) for u in store.units] == [
        ("Save the file", "Datei speichern"), ('Quit <now> & "then"', 'Jetzt <beenden> & "dann"')]


@pytest.mark.parametrize("case, message", [
    ("other pair", "m.db: a en-de memory; these pairs are en-fr"),
    ("tmx languages", "b.tmx: no segment in fr"),
    ("damaged", "bad.db: not a readable translation memory (file is not a database)"),
    ("missing", "none.db: no such memory; make one with mt memory add"),
    ("no format", "nothing: neither a file whose name says its format"),
])
def test_errors_are_one_line_with_exit_4(cli, files, tmp_path, case, message):
    m = tmp_path / "m.db"
    add(cli, m, files / "c.tsv")
    (tmp_path / "bad.db").write_bytes(b"garbage" * 1000)
    r = {"other pair": lambda: add(cli, m, files / "c.tsv", tgt="fr"),
         "tmx languages": lambda: add(cli, tmp_path / "fr.db", files / "b.tmx", tgt="fr"),
         "damaged": lambda: cli("memory", "search", tmp_path / "bad.db", "Save"),
         "missing": lambda: cli("memory", "info", tmp_path / "none.db"),
         "no format": lambda: add(cli, m, tmp_path / "nothing")}[case]()
    assert r.code == 4 and r.err.count("\n") == 1 and message in r.err, r.err


def test_a_bad_file_adds_nothing(cli, files, tmp_path):
    (tmp_path / "bad.tsv").write_text("a\tb\nno tab here\n", encoding="utf-8")
    m = tmp_path / "m.db"
    r = add(cli, m, files / "c.tsv", tmp_path / "bad.tsv")
    assert r.code == 4 and "bad.tsv:2" in r.err
    assert not m.exists()


@pytest.mark.slow  # three processes adding at once
def test_concurrent_adds_lose_nothing(tmp_path):
    m, runs = tmp_path / "m.db", []
    for k in range(3):  # each its own 3,000 pairs and 1,000 shared by all
        f = tmp_path / f"{k}.tsv"
        f.write_text("".join(f"line {k}-{i}\tZeile {k}-{i}\n" for i in range(3000)) +
                     "".join(f"shared {i}\tgeteilt {i}\n" for i in range(1000)), encoding="utf-8")
        runs.append(subprocess.Popen([sys.executable, "-m", "mt", "memory", "add", str(m),
                                      str(f), "--src", "en", "--tgt", "de"], cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = [(p.wait(timeout=600), p.stdout.read(), p.stderr.read()) for p in runs]
    assert [code for code, _, _ in results] == [0, 0, 0], results
    assert sum(json.loads(out)["added"] for _, out, _ in results) == 10_000
    from mt.memory import open_memory

    with open_memory(m) as memory:
        assert memory.info()["pairs"] == 10_000
        assert memory.search("line 2-2999", k=1)[0].target == "Zeile 2-2999"
