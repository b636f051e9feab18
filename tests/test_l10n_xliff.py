"""mt/l10n/xliff.py and the `xliff` corpus format: XLIFF 1.2 and 2.0 read as segments, their
inline codes nested and self-closing; a training pair is plain text; segments without a
target or under translate="no" left out and counted by `mt data check`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from conftest import CONFIG, assert_user_error, localization_file
from mt.corpus_formats import CorpusSource
from mt.errors import DataError
from mt.l10n.inline import plain
from mt.l10n.xliff import Languages, read

DATA = Path(__file__).parent / "data" / "l10n"


def segments(name: str):
    with open(DATA / name, "rb") as f:
        return [s for s in read(f, name) if not isinstance(s, Languages)]


def codes(pieces, data: bytes) -> list[tuple[str, str]]:
    return [(p.kind, data[p.at:p.end].decode()) for p in pieces if p.kind != "text"]


def test_xliff_1_2_codes_nested_self_closing_and_paired_halves():
    data = (DATA / "v12.xlf").read_bytes()
    found = segments("v12.xlf")
    assert [plain(s.source) for s in found] == [
        "a dog runs in the park.", "the big dog sleeps.", "the man eats bread .",
        "a woman & a child.", "not to translate", "two Pixel men"]
    assert [s.untranslated for s in found] == [True, True, True, False, True, True]
    assert [s.translate for s in found] == [True] * 4 + [False, True]
    assert codes(found[1].source, data) == [("open", '<g id="1">'), ("code", '<x id="2"/>'),
                                            ("close", "</g>")]
    # <bpt>/<ept> around a word pair up as tags; a <ph>'s %s is kept whole, no text
    assert codes(found[2].source, data) == [("open", '<bpt id="3">&lt;b&gt;</bpt>'),
                                            ("close", '<ept id="3">&lt;/b&gt;</ept>'),
                                            ("code", '<ph id="4">%s</ph>')]
    assert codes(found[5].source, data) == [
        ("open", '<bx id="5" rid="1"/>'), ("code", '<mrk mtype="protected">Pixel</mrk>'),
        ("close", '<ex id="6" rid="1"/>')]


def test_xliff_2_0_segments_and_codes():
    data = (DATA / "v20.xlf").read_bytes()
    found = segments("v20.xlf")
    assert [plain(s.source) for s in found] == [
        "a dog runs in the park.", "the big dog sleeps.", "the man eats bread %s.",
        "a woman & a child.", "not to translate"]  # the <ignorable> is no segment
    assert [s.holder.attrs.get("id") for s in found] == ["s1", "s2", None, None, None]
    assert codes(found[2].source, data) == [("open", '<sc id="3"/>'), ("close",
                                            '<ec startRef="3"/>'),
                                            ("code", '<mrk id="m1" translate="no">%s</mrk>')]


def test_halves_that_cross_a_paired_code_stay_placeholders(tmp_path):
    (tmp_path / "x.xlf").write_text(
        '<xliff version="2.0" srcLang="en"><file id="f"><unit id="u"><segment><source>'
        'a <sc id="1"/>b <pc id="2">c<ec startRef="1"/> d</pc> <ec startRef="9"/></source>'
        "</segment></unit></file></xliff>", encoding="utf-8")
    with open(tmp_path / "x.xlf", "rb") as f:
        segment = next(s for s in read(f, "x.xlf") if not isinstance(s, Languages))
    assert [p.kind for p in segment.source if p.kind != "text"] == [
        "code", "open", "code", "close", "code"]


def test_not_xliff_is_refused():
    with pytest.raises(DataError, match=r"^x.xml: not XLIFF \(its root is <html>"):
        list(read(io.BytesIO(b"<html><body/></html>"), "x.xml"))


def test_the_corpus_format_reads_translated_segments_and_counts_the_rest(tmp_path):
    source = CorpusSource("v", "xliff", (DATA / "v12.xlf",), ("en", "de"))
    read_ = source.pairs()
    assert list(read_) == [("a woman & a child.", "eine Frau & ein Kind.")]
    assert read_.left_out == {"no target": 4, "not to translate": 1}
    # the other way round: its pairs turned round; in other languages: refused
    assert list(CorpusSource("v", "xliff", (DATA / "v12.xlf",), ("de", "en")).pairs()) == [
        ("eine Frau & ein Kind.", "a woman & a child.")]
    with pytest.raises(DataError, match="its languages are en to fr, not the corpus's en to "
                                        "de"):
        (tmp_path / "fr.xlf").write_text(localization_file("xliff", [("a", "b")], ("en", "fr")))
        list(CorpusSource("fr", "xliff", (tmp_path / "fr.xlf",), ("en", "de")).pairs())


def test_mt_data_check_counts_what_a_file_left_out(cli, tmp_path):
    train = {"format": "xliff", "path": str(DATA / "v12.xlf")}
    r = cli("data", "check", CONFIG, "--json", "--set", f"data.train={json.dumps([train])}")
    assert r.code == 0, r.err
    first = json.loads(r.out)["corpora"][0]
    assert (first["pairs"], first["left_out"]) == (1, {"no target": 4, "not to translate": 1})
    r = cli("data", "check", CONFIG, "--set", f"data.train={json.dumps([train])}")
    assert "left out: no target" in r.out and "left out: not to translate" in r.out


def test_a_bad_xliff_corpus_is_one_line_and_exit_4(cli, tmp_path):
    (tmp_path / "bad.xlf").write_text('<xliff version="1.2">\n<file>\n</xliff>\n')
    train = {"format": "xliff", "path": str(tmp_path / "bad.xlf")}
    r = cli("data", "check", CONFIG, "--set", f"data.train={json.dumps([train])}")
    assert_user_error(r, 4, "bad.xlf:3: not XML (mismatched tag)")
