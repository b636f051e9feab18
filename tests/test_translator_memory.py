"""Translating with a translation memory (decode.memory; docs/memory.md#translating-with-a-memory):
an exact match reused, not decoded; the best match beside each translation in jsonl and on
Translation; a memory of another pair refused; a PO entry matched exactly gets the stored
translation, not fuzzy; with decode.memory_reuse below 100, a close match reused too (a PO
entry marked fuzzy, unless it would break the msgid's directives). Through `mt translate` and
the Python API, on the toy model."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import assert_user_error
from mt import Translator
from mt.l10n import po
from mt.memory import open_memory

# A person's translation no toy model would write: reusing it shows it was not decoded.
PERSON = "Gestern sahen wir GENAU zwei und vierzig rote Hunde."
STORED = [("Yesterday we saw forty two red dogs.", PERSON),
          ("I need seven hundred eleven books.", "Ich brauche sieben hundert elf Bücher.")]
LINES = ["Yesterday  we saw forty two red dogs.",  # spacing aside: the same words, exact
         "I need seven hundred eleven cats.",  # one word of 7 differs: 85.71
         "You see four birds."]  # no match at 50 or more


@pytest.fixture
def memory(tmp_path):
    path = tmp_path / "tm.db"
    with open_memory(path, ("en", "de")) as m:
        m.add(STORED)
    return path


def translate(cli, run, tmp_path, *more):
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    r = cli("translate", run, "-i", tmp_path / "in.txt", "--threads", "1", *more)
    assert r.code == 0, r.err
    return r.out


def test_an_exact_match_is_reused_and_every_match_is_in_jsonl(cli, tiny_run, memory, tmp_path):
    records = [json.loads(x) for x in translate(cli, tiny_run, tmp_path, "--memory", memory,
                                                "--format", "jsonl").splitlines()]
    assert records[0]["text"] == PERSON
    assert records[0]["match"] == {"source": STORED[0][0], "target": PERSON, "score": 100.0}
    assert records[1]["match"] == {"source": STORED[1][0], "target": STORED[1][1],
                                   "score": round(100 * 6 / 7, 2)}
    assert records[1]["text"] != STORED[1][1]  # decoded: the model writes Katzen for cats
    assert "match" not in records[2]
    plain = translate(cli, tiny_run, tmp_path).splitlines()
    text = translate(cli, tiny_run, tmp_path, "--memory", memory).splitlines()
    assert text == [PERSON, *plain[1:]]  # text output: the translations alone


def test_memory_exact_translate_decodes_every_line(cli, tiny_run, memory, tmp_path):
    plain = translate(cli, tiny_run, tmp_path).splitlines()
    records = [json.loads(x) for x in translate(
        cli, tiny_run, tmp_path, "--memory", memory, "--memory-exact", "translate",
        "--format", "jsonl").splitlines()]
    assert [r["text"] for r in records] == plain
    assert records[0]["match"]["score"] == 100.0


def test_memory_reuse_takes_close_matches_as_they_are(cli, tiny_run, memory, tmp_path):
    records = [json.loads(x) for x in translate(cli, tiny_run, tmp_path, "--memory", memory,
                                                "--memory-reuse", "85", "--format", "jsonl")
               .splitlines()]
    assert [r["text"] for r in records[:2]] == [PERSON, STORED[1][1]]  # 85.71: reused
    assert records[1]["match"]["score"] == round(100 * 6 / 7, 2)
    higher = translate(cli, tiny_run, tmp_path, "--memory", memory, "--memory-reuse", "90")
    assert higher.splitlines()[1] != STORED[1][1]  # below 90: decoded


def test_a_memory_of_another_pair_is_one_line(cli, tiny_run, tmp_path):
    with open_memory(tmp_path / "de-en.db", ("de", "en")) as m:
        m.add([(b, a) for a, b in STORED])
    (tmp_path / "in.txt").write_text(LINES[0] + "\n", encoding="utf-8")
    for where, why in ((tmp_path / "de-en.db", "a de-en memory; this model's languages are "
                        "en-de"), (tmp_path / "missing.db", "no such memory")):
        r = cli("translate", tiny_run, "-i", tmp_path / "in.txt", "--threads", "1",
                "--memory", where, "-o", tmp_path / "out.txt")
        assert_user_error(r, 4, str(where), why)
        assert not (tmp_path / "out.txt").exists()


def test_the_python_api_reuses_and_shows_matches(tiny_run, memory):
    translator = Translator.load(tiny_run, memory=str(memory))
    found = translator.translate_nbest(LINES)
    assert found[0][0].text == PERSON and found[0][0].match.score == 100.0
    assert found[1][0].match.target == STORED[1][1] and found[2][0].match is None
    plain = Translator.load(tiny_run)
    assert plain.translate(LINES[:1]) != [PERSON]
    assert plain.with_options(memory=str(memory)).translate(LINES[:1]) == [PERSON]
    assert translator.translate(LINES[:1], memory_threshold=100.0) == [PERSON]
    higher = translator.translate_nbest(LINES[1:2], memory_threshold=90.0)
    assert higher[0][0].match is None


def test_matches_given_are_used_and_not_looked_up_again(tiny_run, memory, monkeypatch):
    """translate_nbest(matches=...) (mt serve's memory thread looked them up): the memory is
    not searched again, and the matches given decide, as a lookup's would."""
    from mt.memory import Match
    from mt.memory.store import Memory

    translator = Translator.load(tiny_run, memory=str(memory))
    looked_up = translator.translate_nbest(LINES)
    monkeypatch.setattr(Memory, "search", lambda *a, **k: pytest.fail("looked up again"))
    given = [looked_up[i][0].match for i in range(3)]
    again = translator.translate_nbest(LINES, matches=given)
    assert [(t[0].text, t[0].match) for t in again] == [
        (t[0].text, t[0].match) for t in looked_up]
    stored = Match("x", "Ein gespeicherter Satz.", 100.0)  # whatever the caller found
    assert translator.translate_nbest(LINES[2:], matches=[stored])[0][0].text == stored.target
    with pytest.raises(ValueError, match="3 lines and 1 matches"):
        translator.translate_nbest(LINES, matches=[stored])


def test_a_reused_match_is_not_rewritten_by_a_glossary(tiny_run, memory):
    translator = Translator.load(tiny_run, memory=str(memory), beam=2)
    glossary = [("dogs", "Köter")]
    reused, decoded = translator.translate(LINES[:1] + ["We saw two dogs."], glossary=glossary)
    assert reused == PERSON
    assert "Köter" in decoded  # the glossary still holds where the model decodes


PO = """msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

msgid "I need seven hundred eleven books."
msgstr ""

msgid "I need seven hundred eleven cats."
msgstr ""
"""


def test_a_po_entry_matched_exactly_gets_the_stored_translation_not_fuzzy(cli, tiny_run,
                                                                           memory, tmp_path):
    (tmp_path / "in.po").write_text(PO, encoding="utf-8")
    out = tmp_path / "de.po"
    r = cli("translate", tiny_run, "-i", tmp_path / "in.po", "-o", out, "--doc-format", "po",
            "--threads", "1", "--memory", memory)
    assert r.code == 0, r.err
    exact, fuzzy = po.read(out.read_text(encoding="utf-8"), "out").entries
    assert exact.po.msgstr == STORED[1][1] and "fuzzy" not in exact.po.flags
    assert fuzzy.translated and "fuzzy" in fuzzy.po.flags
    if shutil.which("msgfmt"):
        subprocess.run(["msgfmt", "--check", "--use-fuzzy", "-o", "/dev/null", str(out)],
                       check=True)


CLOSE_PO = """msgid "I need seven hundred eleven cats."
msgstr ""

#, c-format
msgid "I need %d hundred eleven cats."
msgstr ""
"""


def test_a_close_match_is_a_fuzzy_entry_where_it_keeps_the_directives(cli, tiny_run, memory,
                                                                      tmp_path):
    (tmp_path / "in.po").write_text(CLOSE_PO, encoding="utf-8")
    out = tmp_path / "de.po"
    r = cli("translate", tiny_run, "-i", tmp_path / "in.po", "-o", out, "--doc-format", "po",
            "--threads", "1", "--memory", memory, "--memory-reuse", "60")
    assert r.code == 0, r.err
    text = out.read_text(encoding="utf-8")
    close, directive = po.read(text, "out").entries
    assert close.po.msgstr == STORED[1][1] and "fuzzy" in close.po.flags
    assert "# mt: translation memory, 86% match" in text
    assert "%d" in directive.po.msgstr  # the stored target has no %d: the model's
    assert text.count("translation memory") == 1
    if shutil.which("msgfmt"):
        subprocess.run(["msgfmt", "--check", "--use-fuzzy", "-o", "/dev/null", str(out)],
                       check=True)


def test_mt_eval_scores_the_reused_translations(cli, tiny_run, memory, tmp_path):
    (tmp_path / "src.txt").write_text(LINES[0] + "\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text(PERSON + "\n", encoding="utf-8")

    def bleu(*more):
        r = cli("eval", tiny_run, "--src", tmp_path / "src.txt", "--ref", tmp_path / "ref.txt",
                "--threads", "1", *more)
        assert r.code == 0, r.err
        return float(r.out.split("=")[1].split()[0])

    assert bleu("--memory", memory) == 100.0 > bleu()
