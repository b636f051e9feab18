"""mt/corpora/testsets.py and `mt data sacrebleu`: test sets through sacreBLEU's own download,
checksum, extraction and cache, against a loopback server holding tarballs in the layouts the
real ones have, as sacreBLEU's table describes them (sacrebleu/dataset/__init__.py, DATASETS:
wmt19 is https://data.statmt.org/wmt19/translation-task/test.tgz, MD5 listed, holding
sgm/newstest2019-deen-src.de.sgm and sgm/newstest2019-deen-ref.en.sgm in WMT's SGML-like
format, read by sacrebleu/dataset/fake_sgml.py); FLORES-200's tarball holds
flores200_dataset/{dev,devtest}/{code}.{split} (https://github.com/facebookresearch/flores,
the flores200 README). A wrong checksum, a cut, a 404, a server that never answers, an unknown
test set or pair: each one line, and nothing damaged kept for the next run to use."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from conftest import assert_user_error
from loopback import FileServer
from mt.corpora import testsets

SOURCES = ["Ein Satz.", "Noch ein Satz & mehr.", "Der dritte."]
REFERENCES = ["A sentence.", "Another sentence & more.", "The third."]
WMT19 = "/wmt19/translation-task/test.tgz"
FLORES = "/nllb/flores200_dataset.tar.gz"


def tarball(files: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def sgml(lines: list[str], role: str, lang: str) -> str:
    # "fake" SGML: the text as it is, "&" and all (sacreBLEU reads it with a regex)
    segs = "".join(f'<seg id="{i}">{line}</seg>\n' for i, line in enumerate(lines, 1))
    kind = "srcset" if role == "src" else "refset"
    return (f'<{kind} setid="newstest2019" srclang="any" trglang="{lang}">\n'
            f'<doc sysid="{role}" docid="abcnews.306815" genre="news" origlang="de">\n'
            f"<p>\n{segs}</p>\n</doc>\n</{kind}>\n")


WMT19_TGZ = tarball({"sgm/newstest2019-deen-src.de.sgm": sgml(SOURCES, "src", "de"),
                     "sgm/newstest2019-deen-ref.en.sgm": sgml(REFERENCES, "ref", "en")})


@pytest.fixture
def sacre(monkeypatch, tmp_path):
    """start(md5=..., **how): a server with wmt19's tarball; sacreBLEU's cache in tmp, its
    wmt19 entry pointing at the server (with the tarball's MD5 unless told another)."""
    import sacrebleu.dataset.base as base
    from sacrebleu.dataset import DATASETS

    monkeypatch.setattr(base, "SACREBLEU_DIR", str(tmp_path / "sacrebleu"))
    real, servers = DATASETS["wmt19"], []

    def start(md5: str | None = None, files: dict | None = None, **how) -> FileServer:
        server = FileServer({WMT19: WMT19_TGZ, FLORES: flores_tgz()} if files is None else files,
                            **how)
        servers.append(server)
        wmt19 = type(real)("wmt19", data=[server.url + WMT19],
                           md5=[md5 or hashlib.md5(WMT19_TGZ).hexdigest()],
                           description=real.description, citation=real.citation,
                           langpairs=real.langpairs)
        monkeypatch.setitem(DATASETS, "wmt19", wmt19)
        monkeypatch.setattr(testsets, "FLORES_URL", server.url + FLORES)
        return server

    yield start
    for s in servers:
        s.close()


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
    sacre(md5="0" * 32)
    r = cli("data", "sacrebleu", "-t", "wmt19", "-l", "de-en", "--dest", tmp_path / "d")
    md5 = hashlib.md5(WMT19_TGZ).hexdigest()
    assert_user_error(r, 4, "wmt19: checksum mismatch", f"MD5 {md5}, expected {'0' * 32}",
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

    sacre(cut=[WMT19])
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


def flores_tgz(devtest: int = 1012) -> bytes:
    files = {}
    for split, n in (("dev", 997), ("devtest", devtest)):
        for code in ("eng_Latn", "deu_Latn", "fra_Latn"):
            files[f"flores200_dataset/{split}/{code}.{split}"] = "".join(
                f"{code} {split} sentence {i}.\n" for i in range(n))
    return tarball(files)


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
