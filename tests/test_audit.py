import dataclasses
import json

import pytest

from conftest import PLANTED, PLANTED_PAIRS, PLANTED_TEST, PLANTED_VAL, write_pairs
from mt.audit import Finding, audit, held_out
from mt.config import DataConfig
from mt.corpus_formats import CorpusSource
from mt.data import corpus_sources
from mt.errors import DataError


@pytest.fixture
def planted(tmp_path):
    """The planted corpus as files: train, val and test."""
    return [CorpusSource(split, "plain", write_pairs(tmp_path, split, pairs)) for split, pairs in
            (("train", PLANTED_PAIRS), ("val", PLANTED_VAL), ("test", PLANTED_TEST))]


def test_every_planted_defect_is_counted_with_its_lines(planted):
    result = audit(planted[:1], planted[1:], max_len=100, max_ratio=3)
    train, val, test = result.corpora
    assert (train.name, train.pairs, val.pairs, test.pairs) == ("train", 17, 2, 2)
    for key, lines in PLANTED.items():
        assert getattr(train, key) == Finding(len(lines), lines), key
        assert getattr(val, key).count == getattr(test, key).count == 0, key
    # line 12's source is val's line 1 and test's line 2; line 13 is test's line 1 (whitespace
    # aside), source and pair
    over_val, over_test = train.overlap
    assert (over_val.split, over_val.split_pairs) == ("val", 2)
    assert over_val.sources == Finding(1, [12]) and over_val.pairs == Finding()
    assert (over_val.split_sources_seen, over_val.split_pairs_seen) == (1, 0)
    assert over_test.sources == Finding(2, [12, 13]) and over_test.pairs == Finding(1, [13])
    assert (over_test.split_sources_seen, over_test.split_pairs_seen) == (2, 1)
    assert val.overlap == test.overlap == []


def test_limits_and_examples(planted, monkeypatch):
    monkeypatch.setattr("mt.audit.EXAMPLES", 1)
    train = audit(planted[:1], [], max_len=5, max_ratio=1.2).corpora[0]
    assert train.too_long == Finding(4, [2])  # lines 2, 5, 10, 11: 6 words or more on a side
    assert train.ratio == Finding(2, [5])  # and line 12: 5 words > 1.2 * 4


def test_report_and_json(planted):
    result = audit(planted[:1], planted[1:], max_len=100, max_ratio=3)
    assert json.loads(result.to_json()) == dataclasses.asdict(result)
    report = result.report()
    assert "train: 17 pairs" in report
    assert "duplicate pairs (repeats)             2  lines 3, 11" in report
    assert "pair in test                          1  lines 13  (1 of test's 2)" in report
    assert "source in val                         1  lines 12  (1 of val's 2)" in report


def test_bad_input_is_one_data_error_before_reading(planted, tmp_path):
    src, tgt = planted[0].paths
    with pytest.raises(DataError, match="missing.en: file not found"):
        audit(planted[:1], [CorpusSource("val", "plain", (src, tmp_path / "missing.en"))], 100, 3)
    tgt.write_text("one line\n", encoding="utf-8")
    with pytest.raises(DataError, match="differ in length.*17 lines.*has 1"):
        audit(planted[:1], [], 100, 3)


def test_a_config_names_its_corpora():
    d = DataConfig(dir="x", train="tr", val="va", test="te", src_lang="de", tgt_lang="en")
    assert [(c.name, *(p.name for p in c.paths)) for c in corpus_sources(d)] == [
        ("tr", "tr.de", "tr.en")]
    assert [(c.name, c.paths[0].name) for c in held_out(d)] == [("va", "va.de"), ("te", "te.de")]
