"""mt/corpus_formats/po.py: gettext PO files as pairs, what they leave out counted."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from test_l10n_po import DATA

from conftest import CONFIG
from mt.config import load_config
from mt.data import corpus_sources
from mt.errors import DataError


def sources(path: str, langs=("en", "ru")):
    cfg = load_config(None, [f"data.train=[{{format: po, path: '{path}'}}]",
                             f"data.src_lang={langs[0]}", f"data.tgt_lang={langs[1]}"])
    return corpus_sources(cfg.data)


def test_pairs_plurals_by_the_file_forms_context_dropped_the_rest_left_out():
    (source,) = sources(str(DATA / "corpus.ru.po"))
    read = source.pairs()
    assert list(read) == [
        ("Open %s", "Открыть %s"), ("File", "Файл"), ("File", "Файл (сущ.)"),  # two contexts
        ("%d file", "%d файл"), ("%d files", "%d файлов")]  # forms of n = 1 and of most counts
    assert read.left_out == {"header": 1, "fuzzy": 1, "obsolete": 1, "untranslated": 1}


def test_a_directory_and_a_glob_give_their_po_files_sorted(tmp_path):
    for name in ("b/x.po", "a/y.po", "a/z.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        shutil.copy(DATA / "corpus.ru.po", tmp_path / name)
    (by_dir,) = sources(str(tmp_path))
    (by_glob,) = sources(str(tmp_path / "*" / "*.po"))
    assert by_dir.paths == by_glob.paths == (tmp_path / "a/y.po", tmp_path / "b/x.po")
    read = by_dir.pairs()
    assert len(list(read)) == 10 and read.left_out["fuzzy"] == 2
    with pytest.raises(DataError, match="no .po files there"):
        sources(str(tmp_path / "*.po"))


def test_a_one_form_language_gives_the_plural_once(tmp_path):
    ja = tmp_path / "ja.po"
    ja.write_text('msgid ""\nmsgstr "Plural-Forms: nplurals=1; plural=0;\\n"\n\n'
                  'msgid "%d file"\nmsgid_plural "%d files"\nmsgstr[0] "%d 個"\n',
                  encoding="utf-8")
    (source,) = sources(str(ja), ("en", "ja"))
    assert list(source.pairs()) == [("%d files", "%d 個")]


def test_a_broken_file_is_a_data_error_naming_its_line():
    (source,) = sources(str(DATA / "broken.po"))
    with pytest.raises(DataError, match=r"broken.po:8: PO syntax error"):
        list(source.pairs())


def test_mt_data_check_counts_what_is_left_out(cli):
    corpus = f"{{format: po, path: '{DATA / 'corpus.ru.po'}'}}"
    args = [CONFIG, "--set", f"data.train=[{corpus}]", "--set", f"data.val={corpus}", "--set",
            f"data.test={corpus}", "--set", "data.src_lang=en", "--set", "data.tgt_lang=ru"]
    r = cli("data", "check", *args)
    assert r.code == 0, r.err
    assert r.out.startswith("corpus.ru.po: 5 pairs")
    for why in ("header", "fuzzy", "obsolete", "untranslated"):
        assert re.search(rf"\n  left out: {why} +1\n", r.out), r.out
    r = cli("data", "check", "--json", *args)
    assert json.loads(r.out)["corpora"][0]["left_out"]["fuzzy"] == 1
