"""`mt translate --input-format jsonl`: records with their own glossary and prefix, translated
as the Python API translates them; a bad record is one line naming its line, before the model
loads, nothing written."""

import json

import pytest

from conftest import TWO_LINES
from mt.commands.jsonl_input import Record, parse
from mt.errors import DataError
from mt.glossary import Glossary

FIRST, SECOND = TWO_LINES.splitlines()


def write(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_a_record_holds_its_source_glossary_and_prefix():
    assert parse('{"src": "a b"}', "f:1") == Record("a b")
    got = parse('{"src": "a", "glossary": [[" a ", "x"]], "prefix": "X", "glossary": null}', "")
    assert got == Record("a", None, "X")  # JSON's last key wins
    got = parse('{"src": "a", "glossary": [["a", "x"], ["b", "y"]], "prefix": null}', "")
    assert got == Record("a", Glossary((("a", "x"), ("b", "y"))), "")


@pytest.mark.parametrize("line, message", [
    ("", "in.jsonl:2: an empty line"),
    ("{src: 1}", "in.jsonl:2: not JSON (Expecting property name enclosed in double quotes, "
                 "column 2)"),
    ('["a"]', "in.jsonl:2: not a JSON object"),
    ('{"text": "a"}', "in.jsonl:2: unknown key 'text'; a record has src, glossary, prefix"),
    ('{"glossary": []}', 'in.jsonl:2: "src" is missing'),
    ('{"src": 3}', 'in.jsonl:2: "src" is not a string'),
    ('{"src": "a\\nb"}', 'in.jsonl:2: "src" holds a line break'),
    ('{"src": "a", "prefix": 1}', 'in.jsonl:2: "prefix" is not a string'),
    ('{"src": "a", "glossary": "a"}', 'in.jsonl:2: "glossary" is not a list'),
    ('{"src": "a", "glossary": [["a"]]}', "in.jsonl:2: glossary: entry 1: an entry is two "
                                          "strings"),
    ('{"src": "a", "glossary": [null]}', "in.jsonl:2: glossary: entry 1: an entry is two "
                                         "strings, [source term, target term], not null"),
    ('{"src": "a", "glossary": [["a", "b"], 3]}', "in.jsonl:2: glossary: entry 2: an entry is "
                                                  "two strings, [source term, target term], "
                                                  "not 3"),
    ('{"src": "a", "glossary": [["a", "b"], ["a", "c"]]}', "in.jsonl:2: glossary: entry 2: 'a' "
                                                            "again, as 'c'"),
    ('{"src": "a", "glossary": [["a", "' + "x" * 201 + '"]]}', "in.jsonl:2: glossary: entry 1: "
                                                          "target term of 201 characters"),
])
def test_a_bad_record_is_one_line_naming_it_before_the_model_loads(cli, tmp_path, line,
                                                                   message):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.txt"
    src.write_text('{"src": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        parse(line, "in.jsonl:2")
    assert str(e.value).startswith(message)
    # the run does not exist: the record is read first
    r = cli("translate", tmp_path / "no-run", "--input-format", "jsonl", "-i", src, "-o", out)
    assert r.code == 4 and message in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not out.exists()


@pytest.mark.parametrize("options, message", [
    (["--prefix", "p.txt"], "not with --prefix"),
    (["--doc-format", "md"], "not with a whole document"),
    (["--format", "html"], "not with a whole document"),
    (["--attention", "pictures"], "not with --attention"),
    (["--input-format", "xml"], "'xml': expected text or jsonl"),
])
def test_options_that_do_not_go_with_records_are_refused_first(cli, tmp_path, options, message):
    src = write(tmp_path / "in.jsonl", [{"src": "A line."}])
    r = cli("translate", tmp_path / "no-run", "--input-format", "jsonl", "-i", src, *options)
    assert r.code == 2 and message in r.err and "Traceback" not in r.err, r.err


def test_records_translate_as_the_python_api_with_their_glossaries(cli, tmp_path, tiny_run):
    from mt import Translator

    g = tmp_path / "g.tsv"
    g.write_text("dogs\tHäuser\nbooks\tKatzen\n", encoding="utf-8")
    records = [{"src": FIRST, "glossary": [["dogs", "Vögel"]]}, {"src": SECOND},
               {"src": FIRST, "prefix": "Heute"}, {"src": ""},
               {"src": SECOND, "glossary": [["need", "Autos"]]}]
    src = write(tmp_path / "in.jsonl", records)
    r = cli("translate", tiny_run, "--input-format", "jsonl", "-i", src, "--beam", "3",
            "--format", "jsonl", "--glossary", g)
    assert r.code == 0, r.err
    got = [json.loads(line) for line in r.out.splitlines()]
    assert [x["src"] for x in got] == [x["src"] for x in records]
    # the file's entries for every line; a record's own added, its target winning
    assert [x["terms"] for x in got] == [[["dogs", "Vögel"]], [["books", "Katzen"]],
                                         [["dogs", "Häuser"]], [],
                                         [["need", "Autos"], ["books", "Katzen"]]]
    assert all(x["missing"] == [] for x in got)
    want = Translator.load(tiny_run, beam=3).translate(
        [x["src"] for x in records], prefix=[x.get("prefix", "") for x in records],
        glossary=str(g), glossaries=[x.get("glossary") for x in records])
    assert [x["text"] for x in got] == want
    assert got[2]["text"].startswith("Heute")
    # without --glossary, text out: a record without a glossary is translated as plain text is
    r = cli("translate", tiny_run, "--input-format", "jsonl", "-i", src, "--beam", "3")
    plain = cli("translate", tiny_run, "--beam", "3", stdin=TWO_LINES.encode()).out
    assert r.code == 0 and r.out.splitlines()[1] == plain.splitlines()[1]
    assert "Vögel" in r.out.splitlines()[0] and "Autos" in r.out.splitlines()[4]
    r = cli("translate", tiny_run, "--input-format", "jsonl", "-i", src, "--beam", "1")
    assert r.code == 3 and "give --beam 2 or more" in r.err and not r.out


def test_records_as_paragraphs_keep_their_glossaries_sentence_by_sentence(cli, tmp_path,
                                                                         tiny_run):
    records = [{"src": f"{FIRST} {SECOND}", "glossary": [["books", "Autos"]]}, {"src": FIRST}]
    src = write(tmp_path / "in.jsonl", records)
    r = cli("translate", tiny_run, "--input-format", "jsonl", "-i", src, "--beam", "3",
            "--split-sentences")
    plain = cli("translate", tiny_run, "--beam", "3", stdin=TWO_LINES.encode()).out.splitlines()
    assert r.code == 0, r.err
    paragraph, alone = r.out.splitlines()
    assert paragraph.startswith(plain[0] + " ") and "Autos" in paragraph and alone == plain[0]
    bad = write(tmp_path / "bad.jsonl", [{"src": FIRST, "prefix": "Heute"}])
    r = cli("translate", tiny_run, "--input-format", "jsonl", "-i", bad, "--split-sentences")
    assert r.code == 4 and 'bad.jsonl:1: "prefix": not with --split-sentences' in r.err
