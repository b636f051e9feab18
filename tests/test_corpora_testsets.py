"""mt/corpora/testsets.py and `mt data sacrebleu`: test sets through sacreBLEU's own download,
checksum, extraction and cache, against a loopback server holding tarballs in the layouts the
real ones have (wmt19's, FLORES-200's: tests/public_corpora.py says where each is documented).
A wrong checksum, a cut, a 404, a server that never answers, an unknown
test set or pair: each one line, and nothing damaged kept for the next run to use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import assert_user_error
from mt.corpora import testsets
from public_corpora import flores_tgz, md5, url_path, wmt_tarball

SOURCES = ["Ein Satz.", "Noch ein Satz & mehr.", "Der dritte."]
REFERENCES = ["A sentence.", "Another sentence & more.", "The third."]
FLORES = "/nllb/flores200_dataset.tar.gz"
WMT19 = wmt_tarball("wmt19", {"de-en": (SOURCES, REFERENCES)})


@pytest.fixture
def sacre(sacrebleu_host):
    """start(md5=..., files=..., **how): wmt19 (de-en: SOURCES, REFERENCES) and FLORES-200 on
    loopback, wmt19 with its tarball's MD5 unless told another."""
    def start(md5_: str | None = None, files: dict | None = None, **how):
        if files is None:
            files = {url_path("wmt19"): WMT19, FLORES: flores_tgz()}
        return sacrebleu_host(files, {"wmt19": md5_ or md5(WMT19)}, **how)
    return start


def test_a_wmt_test_set_is_fetched_by_sacrebleu_and_written_as_a_split(sacre, cli, tmp_path):
    server = sacre()
    r = cli("data", "sacrebleu", "-t", "wmt19", "-l", "de-en", "--dest", tmp_path / "d")
    assert r.code == 0, r.err
    stem = tmp_path / "d" / "wmt19.de-en"
    assert json.loads(r.out) == {"test_set": "wmt19", "languages": "de-en", "lines": 3,
                                 "files": [f"{stem}.de", f"{stem}.en"]}
    assert Path(f"{stem}.de").read_text("utf-8").splitlines() == SOURCES
    assert Path(f"{stem}.en").read_text("utf-8").splitlines() == REFERENCES
    assert (tmp_path / "sacrebleu" / "wmt19" / "raw" / "wmt19.test.tgz").is_file()  # its cache
    server.close()  # from sacreBLEU's cache now: no network needed
    r = cli("data", "sacrebleu", "-t", "wmt19", "-l", "de-en", "--dest", tmp_path / "again")
    assert r.code == 0, r.err


def test_a_wrong_checksum_is_one_line_and_the_tarball_is_not_kept(sacre, cli, tmp_path):
    sacre(md5_="0" * 32)
    r = cli("data", "sacrebleu", "-t", "wmt19", "-l", "de-en", "--dest", tmp_path / "d")
    assert_user_error(r, 4, "wmt19: checksum mismatch", f"MD5 {md5(WMT19)}, expected {'0' * 32}",
                      "removed: run again")
    assert not (tmp_path / "sacrebleu" / "wmt19" / "raw" / "wmt19.test.tgz").exists()
    assert not (tmp_path / "d").exists()
    sacre()  # the next run downloads again, rather than trusting what failed
    assert cli("data", "sacrebleu", "-t", "wmt19", "-l", "de-en", "--dest",
               tmp_path / "d").code == 0


def test_a_cut_a_404_and_silence_are_one_line_each(sacre, cli, tmp_path, monkeypatch):
    raw = tmp_path / "sacrebleu" / "wmt19" / "raw"

    def kept() -> list[str]:  # but sacreBLEU's lock file
        return [p.name for p in raw.iterdir() if not p.name.endswith(".lock")]

    sacre(cut=[url_path("wmt19")])
    r = cli("data", "sacrebleu", "-t", "wmt19", "-l", "de-en", "--dest", tmp_path / "d")
    assert_user_error(r, 4, "wmt19: cannot download", "nothing of it was kept")
    assert kept() == []
    sacre(files={})
    r = cli("data", "sacrebleu", "-t", "wmt19", "-l", "de-en", "--dest", tmp_path / "d")
    assert_user_error(r, 4, "wmt19:", "test.tgz: HTTP 404 Not Found")
    monkeypatch.setattr(testsets, "TIMEOUT", 0.5)
    sacre(silent=True)
    r = cli("data", "sacrebleu", "-t", "wmt19", "-l", "de-en", "--dest", tmp_path / "d")
    assert_user_error(r, 4, "wmt19: cannot download", "timed out")
    assert kept() == [] and not (tmp_path / "d").exists()


def test_an_unknown_test_set_or_pair_is_one_line_naming_what_there_is(cli, tmp_path):
    r = cli("data", "sacrebleu", "-t", "wmt91", "-l", "de-en", "--dest", tmp_path)
    assert_user_error(r, 4, "unknown test set 'wmt91'; did you mean ", "wmt19", "--list")
    r = cli("data", "sacrebleu", "-t", "wmt19", "-l", "de-xx", "--dest", tmp_path)
    assert_user_error(r, 4, "wmt19 has no de-xx; it has", "de-en, de-fr")
    assert_user_error(cli("data", "sacrebleu", "-l", "de-en"), 2, "'-t'", "needed")
    r = cli("data", "sacrebleu", "--list", "-l", "kk-en")
    assert r.code == 0 and [line.split(":")[0] for line in r.out.splitlines()] == ["wmt19",
                                                                              "wmt19/dev"]
    r = cli("data", "sacrebleu", "--list")
    assert "flores200/devtest: FLORES-200 devtest" in r.out and len(r.out.splitlines()) > 60


def test_flores200_is_fetched_once_for_both_splits_and_counted(sacre, cli, tmp_path):
    server = sacre()
    for split, n in (("devtest", 1012), ("dev", 997)):
        r = cli("data", "sacrebleu", "-t", f"flores200/{split}", "-l", "eng_Latn-deu_Latn",
                "--dest", tmp_path / "f")
        assert r.code == 0, r.err
        assert json.loads(r.out)["lines"] == n
        lines = (tmp_path / "f" / f"flores200_{split}.eng_Latn-deu_Latn.deu_Latn").read_text()
        assert lines.splitlines()[-1] == f"deu_Latn {split} sentence {n - 1}."
    assert [path for path, _ in server.requests] == [FLORES]  # one tarball for both splits
    r = cli("data", "sacrebleu", "-t", "flores200/dev", "-l", "eng_Latn-zzz_Latn")
    assert_user_error(r, 4, "FLORES-200 has no zzz_Latn; it has deu_Latn, eng_Latn, fra_Latn")
    assert_user_error(cli("data", "sacrebleu", "-t", "flores200/dev", "-l", "en-de"), 4,
                      "give two FLORES-200 codes, like eng_Latn-deu_Latn")


def test_a_flores200_copy_of_the_wrong_length_is_refused(sacre, cli, tmp_path):
    sacre(files={FLORES: flores_tgz(devtest=1000)})
    r = cli("data", "sacrebleu", "-t", "flores200/devtest", "-l", "eng_Latn-fra_Latn",
            "--dest", tmp_path / "f")
    assert_user_error(r, 4, "1000 lines, expected 1012")
