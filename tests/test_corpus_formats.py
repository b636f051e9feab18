"""mt/corpus_formats/: the registry of corpus formats. A corpus that names no format is plain;
each format finds its files, checks its keys and reads its pairs; a format added in one module
(and one line of FORMATS) is usable from a config without touching any other module. Every
format is cached, filtered and audited as plain is, and may be the val or test set."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from conftest import CONFIG, TOY, assert_user_error, register, write_as
from mt.config import load_config
from mt.corpus_formats import FORMATS, CorpusConfig, CorpusFormat, CorpusSource
from mt.data import corpus_sources, read_pairs, split_source
from mt.errors import ConfigError, DataError
from mt.token_cache import open_cached_corpora


def sources(tmp_path, *corpora: dict) -> list[CorpusSource]:
    cfg = load_config(None, [f"data.dir={tmp_path}", f"data.train={json.dumps(list(corpora))}"])
    return corpus_sources(cfg.data)


def test_a_corpus_that_names_no_format_is_two_plain_files(tmp_path):
    (tmp_path / "a.de.gz").touch()
    split = corpus_sources(load_config(None, [f"data.dir={tmp_path}", "data.train=a"]).data)
    listed = sources(tmp_path, {"prefix": "a"}, {"src": "x.en", "tgt": "y.de", "weight": 2})
    assert split == listed[:1] == [CorpusSource("a", "plain", (tmp_path / "a.en",
                                                                tmp_path / "a.de.gz"),
                                                ("en", "de"))]
    assert listed[1].format == "plain" and listed[1].weight == 2.0
    assert [str(p) for p in listed[1].paths] == ["x.en", "y.de"]


def test_each_format_reads_its_files(tmp_path):
    (tmp_path / "a.en").write_text("one\ntwo\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("eins\nzwei\n", encoding="utf-8")
    (tmp_path / "a.tsv").write_text("one\teins\ntwo\tzwei\n", encoding="utf-8")
    tsv_corpus = {"format": "tsv", "path": str(tmp_path / "a.tsv")}
    plain, tsv = sources(tmp_path, {"prefix": "a"}, tsv_corpus)
    assert (plain.name, tsv.name, tsv.paths) == ("a", "a.tsv", (tmp_path / "a.tsv",))
    assert list(plain.pairs()) == list(tsv.pairs()) == [("one", "eins"), ("two", "zwei")]
    assert list(tsv.side(1)) == ["eins", "zwei"]


@pytest.mark.parametrize("line, found", [("a b", "no tab"), ("a\tb\tc", "2 tabs")])
def test_a_tsv_line_without_one_tab_is_refused(tmp_path, line, found):
    (tmp_path / "bad.tsv").write_text(f"x\ty\n{line}\n", encoding="utf-8")
    (source,) = sources(tmp_path, {"format": "tsv", "path": str(tmp_path / "bad.tsv")})
    with pytest.raises(DataError, match=rf"bad.tsv:2: expected source TAB target, found {found}"):
        list(source.pairs())


def test_an_unknown_format_is_refused_at_load():
    with pytest.raises(ConfigError, match=r"data.train\[0\].format must be one of plain, tsv, "
                                          "jsonl, parquet, xliff, tmx, po, got 'xml'"):
        load_config(None, ['data.train=[{format: xml, path: a.xml}]'])


class _SrcTgt(CorpusFormat):
    """One {"src": ..., "tgt": ...} object a line."""

    def check(self, c: CorpusConfig, key: str):
        if not c.path:
            yield f"{key}: a srctgt corpus needs path"

    def default_name(self, c):
        return "j"

    def paths(self, c, data_dir, langs):
        return (Path(c.path),)

    def pairs(self, paths, langs):
        for line in paths[0].read_text(encoding="utf-8").splitlines():
            pair = json.loads(line)
            yield pair["src"], pair["tgt"]


@pytest.fixture
def srctgt(monkeypatch):
    """A new format: one module with its FORMAT, and one line in FORMATS; nothing else."""
    register(monkeypatch, FORMATS, "srctgt", "FORMAT", _SrcTgt())


def test_a_new_format_is_one_module_and_one_registry_line(srctgt, tmp_path):
    (tmp_path / "a.st").write_text('{"src": "one", "tgt": "eins"}\n', encoding="utf-8")
    (source,) = sources(tmp_path, {"format": "srctgt", "path": str(tmp_path / "a.st")})
    assert (source.name, source.format, list(source.pairs())) == ("j", "srctgt",
                                                                  [("one", "eins")])
    with pytest.raises(ConfigError, match=r"data.train\[0\]: a srctgt corpus needs path"):
        sources(tmp_path, {"format": "srctgt"})


# --- every format alike: the token cache, data.filter, mt data check, val and test -----------

FORMATS_ = ["plain", "tsv", "jsonl", "parquet", "xliff", "tmx"]


def toy_pairs(n: int, split: str = "train") -> list[tuple[str, str]]:
    sides = [(TOY / f"toy.{split}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
             for lang in ("en", "de")]
    return list(zip(*sides))


def formats_available() -> list[str]:
    return [f for f in FORMATS_ if f != "parquet" or importlib.util.find_spec("pyarrow")]


def test_every_format_is_cached_and_filtered_as_plain_is(tmp_path, cache_dir):
    pairs = toy_pairs(80)
    pairs[5] = pairs[4]  # a duplicate and a copy for data.filter to drop
    pairs[9] = (pairs[9][0], pairs[9][0])
    suffix = {"plain": "", "tsv": ".tsv.gz", "jsonl": ".jsonl.gz", "parquet": ".parquet",
              "xliff": ".xlf.gz", "tmx": ".tmx.gz"}
    built = {}
    for fmt in formats_available():
        corpus = write_as(fmt, tmp_path / f"c{suffix[fmt]}", pairs)
        d = load_config(None, [f"data.train={json.dumps([corpus])}",
                               "data.filter={dedup: true, drop_copies: true}"]).data
        (entry,) = open_cached_corpora(d, workers=1).entries
        data = entry.data()
        built[fmt] = (entry.meta["pairs"], entry.meta["filtered"], entry.src_vocab.itos,
                      entry.tgt_vocab.itos, data.src.ids.tolist(), data.tgt.ids.tolist())
    assert built["plain"][:2] == (78, {"copy": 1, "duplicate": 1})
    assert all(b == built["plain"] for b in built.values())


def test_val_and_test_may_be_corpora_of_any_format(tmp_path):
    val = write_as("tsv", tmp_path / "val.tsv", toy_pairs(3, "val"))
    test = write_as("jsonl", tmp_path / "test.jsonl", toy_pairs(4, "test"))
    d = load_config(None, [f"data.val={json.dumps(val)}", f"data.test={json.dumps(test)}"]).data
    assert split_source(d, "val") == CorpusSource("val.tsv", "tsv", (tmp_path / "val.tsv",),
                                                  ("en", "de"))
    assert read_pairs(split_source(d, "test")) == tuple(map(list, zip(*toy_pairs(4, "test"))))
    cfg = load_config(None, [f"data.val={json.dumps(val)}"])
    cfg.save(tmp_path / "config.yaml")  # a run's config keeps the section
    assert load_config(tmp_path / "config.yaml", []).data.val == cfg.data.val
    plain = split_source(load_config(None, []).data, "val")  # a split name: plain, as before
    assert (plain.name, plain.format, plain.paths[0].name) == ("toy.val", "plain", "toy.val.en")


@pytest.mark.parametrize("value, message", [
    ("{format: tsv}", "data.val: a tsv corpus is one file: give path"),
    ("{format: tsv, path: v.tsv, tag: <bt>}", "data.val: a held-out set has no weight or tag"),
    ("{format: csv, path: v.csv}", "data.val.format must be one of plain, tsv, jsonl, parquet"),
    ("[v]", "'data.val' must be str or a section, got ['v']"),
])
def test_a_held_out_corpus_is_checked_at_load(value, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(None, [f"data.val={value}"])


def test_mt_data_check_audits_every_format_and_names_a_bad_test_line(cli, tmp_path):
    pairs = toy_pairs(30)
    pairs[7] = pairs[3]
    val = write_as("tsv", tmp_path / "val.tsv", toy_pairs(5, "val") + pairs[:1])
    test = write_as("jsonl", tmp_path / "test.jsonl", toy_pairs(5, "test"))
    reports = set()
    for fmt in formats_available():
        train = write_as(fmt, tmp_path / f"train.{fmt}", pairs)
        r = cli("data", "check", CONFIG, "--json", "--set", f"data.train={json.dumps([train])}",
                "--set", f"data.val={json.dumps(val)}", "--set", f"data.test={json.dumps(test)}")
        assert r.code == 0, r.err
        corpora = json.loads(r.out)["corpora"]
        assert [c["pairs"] for c in corpora] == [30, 6, 5]
        assert corpora[0]["duplicate"]["lines"] == [8]
        assert corpora[0]["overlap"][0]["pairs"] == {"count": 1, "lines": [1]}
        reports.add(json.dumps([{k: v for k, v in c.items() if k not in ("name", "src", "tgt")}
                                for c in corpora]))
    assert len(reports) == 1
    (tmp_path / "test.tsv").write_text("a\tb\nno tab here\n", encoding="utf-8")
    r = cli("data", "check", CONFIG, "--set", "data.test={format: tsv, path: "
            f"{tmp_path / 'test.tsv'}}}")
    assert_user_error(r, 4, "test.tsv:2: expected source TAB target, found no tab")
