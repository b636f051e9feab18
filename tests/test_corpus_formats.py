"""mt/corpus_formats/: the registry of corpus formats. A corpus that names no format is plain;
each format finds its files, checks its keys and reads its pairs; a format added in one module
(and one line of FORMATS) is usable from a config without touching any other module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import register
from mt.config import load_config
from mt.corpus_formats import FORMATS, CorpusConfig, CorpusFormat, CorpusSource
from mt.data import corpus_sources
from mt.errors import ConfigError, DataError


def sources(tmp_path, *corpora: dict) -> list[CorpusSource]:
    cfg = load_config(None, [f"data.dir={tmp_path}", f"data.train={json.dumps(list(corpora))}"])
    return corpus_sources(cfg.data)


def test_a_corpus_that_names_no_format_is_two_plain_files(tmp_path):
    (tmp_path / "a.de.gz").touch()
    split = corpus_sources(load_config(None, [f"data.dir={tmp_path}", "data.train=a"]).data)
    listed = sources(tmp_path, {"prefix": "a"}, {"src": "x.en", "tgt": "y.de", "weight": 2})
    assert split == listed[:1] == [CorpusSource("a", "plain", (tmp_path / "a.en",
                                                                tmp_path / "a.de.gz"))]
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
    with pytest.raises(ConfigError, match=r"data.train\[0\].format must be plain or tsv, got "
                                          "'xml'"):
        load_config(None, ['data.train=[{format: xml, path: a.xml}]'])


class _Jsonl(CorpusFormat):
    """One {"src": ..., "tgt": ...} object a line."""

    def check(self, c: CorpusConfig, key: str):
        if not c.path:
            yield f"{key}: a jsonl corpus needs path"

    def default_name(self, c):
        return "j"

    def paths(self, c, data_dir, langs):
        return (Path(c.path),)

    def pairs(self, paths):
        for line in paths[0].read_text(encoding="utf-8").splitlines():
            pair = json.loads(line)
            yield pair["src"], pair["tgt"]


@pytest.fixture
def jsonl(monkeypatch):
    """A new format: one module with its FORMAT, and one line in FORMATS; nothing else."""
    register(monkeypatch, FORMATS, "jsonl", "FORMAT", _Jsonl())


def test_a_new_format_is_one_module_and_one_registry_line(jsonl, tmp_path):
    (tmp_path / "a.jsonl").write_text('{"src": "one", "tgt": "eins"}\n', encoding="utf-8")
    (source,) = sources(tmp_path, {"format": "jsonl", "path": str(tmp_path / "a.jsonl")})
    assert (source.name, source.format, list(source.pairs())) == ("j", "jsonl", [("one", "eins")])
    with pytest.raises(ConfigError, match=r"data.train\[0\]: a jsonl corpus needs path"):
        sources(tmp_path, {"format": "jsonl"})
