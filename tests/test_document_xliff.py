"""mt/document/xliff.py and the `xliff` document format: the segments without a target get one
(marked for review), inline codes put back by the alignment, every other byte as it was;
re-read by translate-toolkit, an XLIFF library mt did not write. Bad input (not XML, an XML
bomb, an external entity) is one line, exit 4, nothing written."""

from __future__ import annotations

import re
from collections import Counter
from difflib import SequenceMatcher
from pathlib import Path

import pytest
from document_fakes import reversed_words
from lxml import etree
from xml_bombs import BOMB, EXTERNAL

from conftest import assert_user_error
from mt.document.document import Document
from mt.document.paragraph import Settings
from mt.memory.match import Match

DATA = Path(__file__).parent / "data" / "l10n"
FILES = ["v12.xlf", "v20.xlf"]


def translated(name: str, overwrite: bool = False, reuse=None) -> str:
    text = (DATA / name).read_text(encoding="utf-8")
    doc = Document(text, "xliff", Settings("en", target="de", overwrite=overwrite, reuse=reuse),
                   name)
    return doc.render(reversed_words(doc.inputs)).text


@pytest.mark.parametrize("name", FILES)
def test_golden_files(name):
    """The fake translation reverses the words: codes follow their words, nested and
    self-closing ones alike (tests/data/l10n/*.reversed.xlf, read by eye once)."""
    assert translated(name) == (DATA / name.replace(".xlf", ".reversed.xlf")).read_text("utf-8")


def changes(before: str, after: str) -> list[tuple[list[str], list[str]]]:
    """The lines that differ: (lines before, lines after) for each change."""
    a, b = before.splitlines(), after.splitlines()
    return [(a[i:j], b[k:m]) for op, i, j, k, m in
            SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op != "equal"]


def assert_only_targets_and_marks_changed(before: str, after: str) -> int:
    """Every line but the new targets and the start tags that carry a state or a language
    is as it was; returns the targets written."""
    written = 0
    for old, new in changes(before, after):
        assert len(new) == max(1, len(old)), (old, new)
        for line in new:
            assert tag(line) in ("target", "file", "xliff", "segment"), line
            written += tag(line) == "target"
        for line, was in zip(new, old):
            assert tag(was) == tag(line), (was, line)
    return written


def tag(line: str) -> str:
    """The name of the element a line begins with."""
    return re.match(r"\s*<([\w:.-]+)", line)[1]


def code_counts(text: bytes) -> list[tuple[Counter, Counter]]:
    """Per segment with a target, the inline codes of its source and of its target."""
    out = []
    for holder in etree.fromstring(text).iter("{*}trans-unit", "{*}segment"):
        sides = {etree.QName(e).localname: e for e in holder if isinstance(e.tag, str)}
        if "target" in sides:
            out.append(tuple(Counter(etree.QName(e).localname + str(sorted(e.attrib.items()))
                                     for e in sides[side].iterdescendants())
                             for side in ("source", "target")))
    return out


def test_overwrite_translates_the_translated_too():
    before = (DATA / "v12.xlf").read_text("utf-8")
    assert "eine Frau &amp; ein Kind." in translated("v12.xlf")
    again = translated("v12.xlf", overwrite=True)
    assert "eine Frau" not in again and "CHILD. A &amp; WOMAN A" in again
    assert assert_only_targets_and_marks_changed(before, again) == 5


STORED = {"a dog runs in the park.": "ein Hund rennt im Park & bellt.",
          "the big dog sleeps.": "der große Hund schläft."}  # the second: a segment with codes


@pytest.mark.parametrize("score", [100.0, 85.0])
@pytest.mark.parametrize("name", FILES)
def test_a_segment_the_memory_holds_gets_its_target(name, score, tmp_path):
    """As a PO entry: the stored target as it is, marked as XLIFF marks an exact match (100)
    or a close one to review (decode.memory_reuse below 100); a segment with inline codes is
    never looked up whole, and stays the model's."""
    asked = []

    def reuse(text: str) -> Match | None:  # a stand-in for the memory's lookup
        asked.append(text)
        return Match(text, STORED[text], score) if text in STORED else None

    before, after = (DATA / name).read_text("utf-8"), translated(name, reuse=reuse)
    assert asked == ["a dog runs in the park."]
    assert assert_only_targets_and_marks_changed(before, after) == (4 if "12" in name else 3)
    v12 = "12" in name
    reused = {(True, 100.0): '<target state="translated" state-qualifier="exact-match">',
              (False, 100.0): '<segment id="s1" state="translated" subState="mt:exact-match">',
              (True, 85.0): '<target state="needs-review-translation" '
                            'state-qualifier="fuzzy-match">',
              (False, 85.0): '<segment id="s1" state="initial" subState="mt:fuzzy-match">'}
    assert after.count(reused[v12, score]) == 1
    assert after.count("mt-suggestion" if v12 else "mt:machine-translation") == (3 if v12 else 2)
    assert "ein Hund rennt im Park &amp; bellt.</target>" in after
    pytest.importorskip("translate.storage.xliff")
    (tmp_path / name).write_text(after, encoding="utf-8")
    first = open_store(tmp_path / name).units[0]
    assert (str(first.source), str(first.target)) == next(iter(STORED.items()))


def open_store(path: Path):
    from translate.storage import factory, xliff2

    if b'version="2.0"' in path.read_bytes():
        return xliff2.Xliff2File.parsefile(str(path))
    return factory.getobject(str(path))


@pytest.mark.parametrize("name", FILES)
def test_a_toy_model_translates_an_xliff_through_the_cli(cli, tiny_run, tmp_path, name):
    pytest.importorskip("translate.storage.xliff")
    out = tmp_path / f"de.{name}"
    r = cli("translate", tiny_run, "-i", DATA / name, "-o", out, "--doc-format", "auto",
            "--threads", "1")
    assert r.code == 0, r.err
    before, after = (DATA / name).read_text("utf-8"), out.read_text("utf-8")
    assert assert_only_targets_and_marks_changed(before, after) == (4 if "12" in name else 3)
    for source, target in code_counts(out.read_bytes()):
        assert source == target  # every code once, well-formed (lxml parsed it)
    old, new = open_store(DATA / name), open_store(out)
    assert [str(u.source) for u in new.units] == [str(u.source) for u in old.units]
    for u, was in zip(new.units, old.units):
        if was.target and str(was.target):
            assert str(u.target) == str(was.target)  # translated before: kept
        elif "not to translate" not in str(u.source):
            assert str(u.target).strip(), u.getid()
    marks = ('state="needs-review-translation" state-qualifier="mt-suggestion"' if "12" in name
             else 'state="initial" subState="mt:machine-translation"')
    assert after.count(marks) == (4 if "12" in name else 3)


@pytest.mark.parametrize("data, message", [
    (b"<xliff version='1.2'>\n<file>\n</xliff>\n", "bad.xlf:3: not XML (mismatched tag)"),
    (BOMB, "bad.xlf:3: declares the entity 'lol'"),
    (EXTERNAL, "bad.xlf:3: declares the entity 'x'"),
])
def test_bad_input_is_one_line_exit_4_nothing_written(cli, tiny_run, tmp_path, data, message):
    (tmp_path / "bad.xlf").write_bytes(data)
    r = cli("translate", tiny_run, "-i", tmp_path / "bad.xlf", "-o", tmp_path / "out.xlf",
            "--doc-format", "xliff", "--threads", "1")
    assert_user_error(r, 4, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.xlf"]
