import gzip
import json
import shutil

import pytest

from conftest import (
    CONFIG,
    MULTI30K,
    PLANTED_PAIRS,
    PLANTED_TEST,
    PLANTED_VAL,
    assert_user_error,
    snapshot,
    write_pairs,
)

needs_multi30k = pytest.mark.skipif(not MULTI30K.is_dir(), reason="needs ../shared/data/multi30k")


@needs_multi30k
@pytest.mark.slow  # copies and counts real Multi30k files
def test_multi30k_copied_from_local_dir_with_counts_checked(cli, tmp_path):
    r = cli("data", "multi30k", "--from", str(MULTI30K), "--dest", str(tmp_path / "m"))
    assert r.code == 0, r.err
    for split, n in (("train", 29000), ("val", 1014), ("test_2016_flickr", 1000)):
        for lang in ("de", "en"):
            with gzip.open(tmp_path / "m" / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
                assert sum(1 for _ in f) == n
            assert f"{split}.{lang}.gz: {n} lines" in r.err


@needs_multi30k
@pytest.mark.slow  # copies real Multi30k files
def test_multi30k_wrong_line_count_is_an_error(cli, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(MULTI30K, src)
    with gzip.open(src / "val.en.gz", "wt", encoding="utf-8") as f:
        f.write("only one line\n")
    r = cli("data", "multi30k", "--from", str(src), "--dest", str(tmp_path / "m"))
    assert_user_error(r, 4, "val.en.gz", "1 lines, expected 1014")


def test_multi30k_missing_source_dir(tmp_path, cli):
    r = cli("data", "multi30k", "--from", str(tmp_path / "none"), "--dest", str(tmp_path / "m"))
    assert_user_error(r, 4, "not found")


def _fake_multi30k(root, files):
    """Gzipped files with the given line counts: {name: lines}."""
    root.mkdir()
    for name, n in files.items():
        with gzip.open(root / name, "wt", encoding="utf-8") as f:
            f.writelines(f"{name} line {i}\n" for i in range(n))
    return root


@pytest.mark.slow  # copies and counts real Multi30k files
def test_multi30k_other_languages_and_test_sets(cli, tmp_path):
    src = _fake_multi30k(tmp_path / "src", {
        "val.fr.gz": 1014, "val.en.gz": 1014, "test_2017_mscoco.fr.gz": 461,
        "test_2017_mscoco.en.gz": 461, "test_2018_flickr.cs.gz": 1071})
    r = cli("data", "multi30k", "--from", str(src), "--dest", str(tmp_path / "m"),
            "--langs", "en,fr", "--splits", "val,test_2017_mscoco")
    assert r.code == 0, r.err
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "test_2017_mscoco.en.gz", "test_2017_mscoco.fr.gz", "val.en.gz", "val.fr.gz"]
    assert "test_2017_mscoco.fr.gz: 461 lines" in r.err
    # a test set not published in a language; unknown names
    dest = str(tmp_path / "n")
    r = cli("data", "multi30k", "--from", str(src), "--dest", dest, "--langs", "en,cs",
            "--splits", "test_2017_mscoco")
    assert_user_error(r, 4, "test_2017_mscoco: not published in cs")
    assert_user_error(cli("data", "multi30k", "--dest", dest, "--splits", "test_2019"),
                      4, "test_2019: unknown", "test_2018_flickr")
    assert_user_error(cli("data", "multi30k", "--dest", dest, "--langs", "ja"),
                      4, "--langs ja", "en, de, fr, cs")


@pytest.mark.slow  # copies and counts real Multi30k files
def test_multi30k_all_splits_of_a_language_pair(cli, tmp_path):
    counts = {"train": 29000, "val": 1014, "test_2016_flickr": 1000, "test_2018_flickr": 1071}
    src = _fake_multi30k(tmp_path / "src", {f"{s}.{lang}.gz": n for s, n in counts.items()
                                            for lang in ("en", "cs")})
    r = cli("data", "multi30k", "--from", str(src), "--dest", str(tmp_path / "m"),
            "--langs", "en,cs", "--splits", "all")  # 2017's test sets have no Czech
    assert r.code == 0, r.err
    assert len(list((tmp_path / "m").iterdir())) == 8


@pytest.fixture
def planted_dir(tmp_path):
    d = tmp_path / "corpus"
    d.mkdir()
    for split, pairs in (("train", PLANTED_PAIRS), ("val", PLANTED_VAL), ("test", PLANTED_TEST)):
        write_pairs(d, split, pairs)
    return d


def bare(d, *splits):
    args = ["--src", d / "train.de", "--tgt", d / "train.en"]
    for split in splits:
        args += [f"--{split}-src", d / f"{split}.de", f"--{split}-tgt", d / f"{split}.en"]
    return args


def test_check_files_report_and_json(cli, planted_dir):
    r = cli("data", "check", *bare(planted_dir, "val", "test"))
    assert r.code == 0, r.err
    assert r.out.startswith("train: 17 pairs")
    assert "source copied to target               1  lines 4" in r.out
    assert "pair in test                          1  lines 13  (1 of test's 2)" in r.out
    r = cli("data", "check", *bare(planted_dir), "--json", "--set", "data.max_len=5")
    assert r.code == 0, r.err
    (train,) = json.loads(r.out)["corpora"]
    assert train["too_long"] == {"count": 4, "lines": [2, 5, 10, 11]}
    assert train["duplicate"] == {"count": 2, "lines": [3, 11]} and train["overlap"] == []


def test_check_a_config_audits_train_against_val_and_test(cli, planted_dir):
    r = cli("data", "check", "--json", CONFIG, "--set", f"data.dir={planted_dir}",
            "--set", "data.src_lang=de", "--set", "data.tgt_lang=en", "--set", "data.train=train",
            "--set", "data.val=val", "--set", "data.test=test", "--set", "data.filter.max_ratio=10")
    assert r.code == 0, r.err
    result = json.loads(r.out)
    assert result["max_ratio"] == 10 and result["max_len"] == 40  # configs/toy.yaml's
    assert [c["name"] for c in result["corpora"]] == ["train", "val", "test"]
    assert [o["split"] for o in result["corpora"][0]["overlap"]] == ["val", "test"]
    assert result["corpora"][0]["ratio"]["count"] == 0  # line 5 is 14 words against 2 (3)


def test_check_bad_input(cli, planted_dir):
    (planted_dir / "val.en").write_text("one\ntwo\nthree\n", encoding="utf-8")
    before = snapshot(planted_dir.parent)
    r = cli("data", "check", "--src", planted_dir / "train.de", "--tgt", planted_dir / "no.en")
    assert_user_error(r, 4, "no.en: file not found")
    r = cli("data", "check", *bare(planted_dir, "val"))
    assert_user_error(r, 4, "differ in length", "val.de has 2 lines", "val.en has 3")
    assert r.out == ""
    assert_user_error(cli("data", "check", CONFIG, "--src", planted_dir / "train.de"), 2,
                      "not both")
    assert_user_error(cli("data", "check"), 2, "give a CONFIG, or both --src and --tgt")
    assert_user_error(cli("data", "check", *bare(planted_dir), "--test-src", "x"), 2,
                      "--test-src", "needs --test-tgt too")
    assert_user_error(cli("data", "check", *bare(planted_dir), "--set", "data.max_len=0"), 3,
                      "data.max_len must be positive")
    assert snapshot(planted_dir.parent) == before  # nothing written
