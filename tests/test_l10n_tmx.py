"""mt/l10n/tmx.py and the `tmx` corpus format: each unit's segments in the corpus's languages
(`de` matching `de-DE`), inline codes taken out; units lacking one left out and counted; a TMX
without one of the languages at all is one line, exit 4."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from conftest import CONFIG, assert_user_error, localization_file
from mt.corpus_formats import CorpusSource
from mt.errors import DataError
from mt.l10n.tmx import units

DATA = Path(__file__).parent / "data" / "l10n"


def test_units_by_language_as_written_codes_out():
    with open(DATA / "memory.tmx", "rb") as f:
        found = list(units(f, "memory.tmx"))
    assert found == [
        {"en-US": "a dog runs in the park.", "de-DE": "ein Hund rennt im Park."},
        {"EN": "the big dog sleeps.", "de": "der große Hund schläft.",
         "fr": "le grand chien dort."},
        {"en": "only English"}]  # TMX 1.1's `lang`


@pytest.mark.parametrize("langs, first", [(("en", "de"), ("a dog runs in the park.",
                                                           "ein Hund rennt im Park.")),
                                          (("de-AT", "fr"), ("der große Hund schläft.",
                                                             "le grand chien dort."))])
def test_languages_match_by_tag_then_by_language(langs, first):
    read = CorpusSource("m", "tmx", (DATA / "memory.tmx",), langs).pairs()
    assert next(iter(read)) == first
    rest = list(read)
    assert read.left_out == {f"lacking {langs[0]} or {langs[1]}": 3 - 1 - len(rest)}


def test_a_tmx_without_one_of_the_languages_is_refused():
    with pytest.raises(DataError) as e:
        list(CorpusSource("m", "tmx", (DATA / "memory.tmx",), ("en", "es")).pairs())
    assert str(e.value).startswith(f"{DATA / 'memory.tmx'}: no segment in es (its languages: ")
    with pytest.raises(DataError, match=r"^t.xml: not TMX \(its root is <xliff>"):
        list(units(io.BytesIO(b"<xliff/>"), "t.xml"))


def test_mt_data_check_reads_a_tmx_and_refuses_one_lacking_a_language(cli, tmp_path):
    train = {"format": "tmx", "path": str(DATA / "memory.tmx")}
    r = cli("data", "check", CONFIG, "--json", "--set", f"data.train={json.dumps([train])}")
    assert r.code == 0, r.err
    first = json.loads(r.out)["corpora"][0]
    assert (first["pairs"], first["left_out"]) == (2, {"lacking en or de": 1})
    (tmp_path / "fr.tmx").write_text(localization_file("tmx", [("a", "b")], ("en", "fr")))
    train = {"format": "tmx", "path": str(tmp_path / "fr.tmx")}
    r = cli("data", "check", CONFIG, "--set", f"data.train={json.dumps([train])}")
    assert_user_error(r, 4, "fr.tmx: no segment in de (its languages: en, fr)")
