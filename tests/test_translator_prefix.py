"""Forced prefixes through the Translator, the Python API and `mt translate --prefix`: every
prefixed output starts with its prefix (greedy, beam, n-best, both engines), and prefix files
of the wrong length are refused before any work, nothing written."""

from __future__ import annotations

import json

import pytest

from conftest import assert_user_error, leftovers, snapshot
from mt.errors import DataError
from mt.translator import Translator

LINES = ["Today you have eight hundred seventy nine cats.", "We have two dogs.", "",
         "Yesterday we had sixty old houses."]
PREFIXES = ["Gestern", "", "Heute", "Wir kaufen drei hundert"]


@pytest.fixture(scope="module")
def translator(tiny_run):
    return Translator.load(tiny_run)


@pytest.mark.parametrize("options", [{}, {"beam": 4, "nbest": 3}, {"beam": 2, "min_len": 9},
                                     {"sampling": "topk", "topk": 3, "samples": 2}])
def test_every_prefixed_output_starts_with_its_prefix(translator, options):
    found = translator.translate_nbest(LINES, PREFIXES, **options)
    free = translator.translate_nbest(LINES, **options)
    for line, p, hyps, alone in zip(LINES, PREFIXES, found, free, strict=True):
        for t in hyps:
            assert t.text.startswith(p) if line else t.text == ""
        if not p:
            assert [t.text for t in hyps] == [t.text for t in alone]
    assert found[0][0].text != free[0][0].text  # the prefix changed what was said
    stream = list(translator.translate_stream(iter(LINES), iter(PREFIXES), **options))
    assert stream == [hyps[0].text for hyps in found]


def test_the_prefix_is_scored(translator):
    forced = translator.translate_nbest(LINES[:1], ["Gestern"])[0][0]
    free = translator.translate_nbest(LINES[:1])[0][0]
    assert forced.score < free.score  # the model would rather say "Heute"
    again = translator.translate_nbest(LINES[:1], [forced.text])[0][0]
    assert again.text == forced.text and again.score == pytest.approx(forced.score, abs=1e-4)


def test_prefix_lists_of_another_length_are_refused(translator):
    with pytest.raises(DataError, match="the prefixes end after 1 of the input's lines"):
        translator.translate(LINES, PREFIXES[:1])
    with pytest.raises(DataError, match="more prefixes than the input's 1 lines"):
        list(translator.translate_stream(iter(LINES[:1]), iter(PREFIXES)))


def test_ctranslate2_forces_the_same_prefixes(tiny_run, translator):
    pytest.importorskip("ctranslate2")
    ct2 = Translator.load(tiny_run, engine="ctranslate2")
    for options in ({}, {"beam": 3}):
        assert ct2.translate(LINES, PREFIXES, **options) == translator.translate(
            LINES, PREFIXES, **options)


def test_cli_prefix_file(cli, tiny_run, tmp_path):
    src, pre, out = tmp_path / "in.txt", tmp_path / "pre.txt", tmp_path / "out.jsonl"
    src.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    pre.write_text("\n".join(PREFIXES) + "\n", encoding="utf-8")
    r = cli("translate", str(tiny_run), "-i", str(src), "--prefix", str(pre), "--beam", "3",
            "--format", "jsonl", "-o", str(out))
    assert r.code == 0, r.err
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [x["src"] for x in records] == LINES
    assert all(x["text"].startswith(p) for x, p in zip(records, PREFIXES, strict=True) if x["src"])
    workers = cli("translate", str(tiny_run), "-i", str(src), "--prefix", str(pre),
                  "--beam", "3", "--format", "jsonl", "--workers", "2")
    assert workers.out == out.read_text(encoding="utf-8")

    short = tmp_path / "short.txt"
    short.write_text("Gestern\n", encoding="utf-8")
    before = snapshot(tmp_path)
    r = cli("translate", str(tiny_run), "-i", str(src), "--prefix", str(short), "-o",
            str(tmp_path / "new.txt"))
    assert_user_error(r, 4, f"--prefix {short}: 1 line(s), the input {src} 4")
    assert snapshot(tmp_path) == before and leftovers(tmp_path) == []
    r = cli("translate", str(tiny_run), "--prefix", str(short), "-o", str(tmp_path / "n.txt"),
            stdin=("\n".join(LINES) + "\n").encode())
    assert_user_error(r, 4, "prefix: the prefixes end after 1 of the input's lines")
    assert snapshot(tmp_path) == before and leftovers(tmp_path) == []
