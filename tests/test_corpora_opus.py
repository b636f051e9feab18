"""mt/corpora/opus.py and `mt data opus`, against a loopback server in OPUS's layouts (the
API's answers, a Moses zip, a TMX: tests/public_corpora.py says where each is documented).

Cut connections, a 404, a server that never answers, a wrong size, a damaged archive, a pair
OPUS lacks: each one line, and no half file used as data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import assert_user_error
from mt.corpora.opus import FORMS
from public_corpora import CORPUS, LICENSE, README, VERSION, OpusServer, moses_zip, tmx_gz

PAIRS = [("Das ist gut.", "That is good."), ("Wir kommen.", "We are coming."),
         ("Zwei\tTabs", "Two tabs"), ("Ünïcödé", "Unicode"), ("Ende.", "The end.")]
DE, EN = [d for d, _ in PAIRS], [e for _, e in PAIRS]


@pytest.fixture
def opus(opus_host):
    """start(moses=..., **how): OPUS on loopback with PAIRS as News-Commentary (its Moses zip
    unless another is given, and its TMX)."""
    def start(moses: bytes | None = None, **how) -> OpusServer:
        return opus_host(moses=moses or moses_zip(DE, EN), tmx=tmx_gz(DE, EN), **how)
    return start


def files(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.iterdir()) if dest.is_dir() else []


def test_a_moses_corpus_is_written_in_the_direction_asked_with_its_licence(opus, cli, tmp_path):
    server = opus()
    dest = tmp_path / "opus"
    r = cli("data", "opus", CORPUS, "-l", "en-de", "--dest", dest)
    assert r.code == 0, r.err
    prefix = dest / f"{CORPUS}-{VERSION}.en-de"
    assert json.loads(r.out) == {
        "files": [f"{prefix}.en", f"{prefix}.de"], "pairs": 5, "prefix": str(prefix),
        "notes": [f"{prefix}.README", f"{prefix}.LICENSE", f"{prefix}.opus.json"]}
    assert Path(f"{prefix}.en").read_text("utf-8").splitlines() == [e for _, e in PAIRS]
    assert Path(f"{prefix}.de").read_text("utf-8").splitlines() == [d for d, _ in PAIRS]
    assert Path(f"{prefix}.LICENSE").read_bytes() == LICENSE
    assert Path(f"{prefix}.README").read_bytes() == README
    about = json.loads(Path(f"{prefix}.opus.json").read_text())
    assert (about["corpus"], about["version"], about["pairs"]) == (CORPUS, VERSION, 5)
    assert "Tiedemann" in about["citation"] and about["license"].endswith(".LICENSE")
    assert server.queries[0] == {"corpus": CORPUS, "source": "de", "target": "en",
                                 "preprocessing": "moses", "version": "latest"}
    cached = tmp_path / "cache" / "opus" / CORPUS / VERSION / "de-en.txt.zip"
    assert cached.read_bytes() == server.archives["moses"]
    fetched = len(server.requests)
    r = cli("data", "opus", CORPUS, "-l", "en-de", "--dest", dest, "--max-pairs", "2")
    assert r.code == 0 and json.loads(r.out)["pairs"] == 2
    assert len(server.requests) == fetched + 1  # the API only: the archive is in the cache
    assert Path(f"{prefix}.en").read_text("utf-8").splitlines() == [e for _, e in PAIRS[:2]]


def test_the_tmx_form_gives_the_same_pairs(opus, cli, tmp_path):
    opus()
    r = cli("data", "opus", CORPUS, "-l", "de-en", "--form", "tmx", "--dest", tmp_path / "t")
    assert r.code == 0, r.err
    prefix = tmp_path / "t" / f"{CORPUS}-{VERSION}.de-en"
    # the unit with German alone is skipped; a segment's whitespace (a tab, a line break)
    # becomes a space, as the tmx corpus format reads it
    assert Path(f"{prefix}.de").read_text("utf-8").splitlines() == \
        [" ".join(d.split()) for d, _ in PAIRS] + ["zwei Zeilen"]
    assert Path(f"{prefix}.en").read_text("utf-8").splitlines()[-1] == "two lines"
    assert files(tmp_path / "t") == [f"{prefix.name}.{x}" for x in ("de", "en", "opus.json")]


def test_the_list_is_of_the_corpora_with_the_pair_largest_first(opus, cli):
    opus()
    r = cli("data", "opus", "--list", "-l", "en-de")
    assert r.code == 0, r.err
    assert [line.split()[:2] for line in r.out.splitlines()] == [["Europarl", VERSION],
                                                                [CORPUS, VERSION]]


def test_a_pair_or_corpus_opus_lacks_is_one_line_naming_what_it_has(opus, cli, tmp_path):
    opus()
    r = cli("data", "opus", "Wikipedia", "-l", "de-en", "--dest", tmp_path / "o")
    assert_user_error(r, 4, "OPUS has no Wikipedia latest for de-en in moses form; corpora "
                      f"with de-en: Europarl, {CORPUS}")
    r = cli("data", "opus", CORPUS, "-l", "de-xx", "--dest", tmp_path / "o")
    assert_user_error(r, 4, f"OPUS has no {CORPUS} latest for de-xx", "no corpus for de-xx")
    assert_user_error(cli("data", "opus", CORPUS, "-l", "de", "--dest", tmp_path / "o"), 2,
                      "'-l'", "give SRC-TGT")
    assert not (tmp_path / "o").exists()


def test_a_cut_download_resumes_and_one_cut_for_good_keeps_no_half_file(opus, cli, tmp_path):
    cached = tmp_path / "cache" / "opus" / CORPUS / VERSION
    server = opus(cut=("moses",), cuts=1)  # cut once: the next try asks for the rest
    r = cli("data", "opus", CORPUS, "-l", "de-en", "--dest", tmp_path / "a")
    assert r.code == 0, r.err
    assert server.ranged() == [f"bytes={len(server.archives['moses']) // 2}-"]
    assert json.loads(r.out)["pairs"] == 5
    (cached / "de-en.txt.zip").unlink()
    opus(cut=("moses",))  # every try cut
    r = cli("data", "opus", CORPUS, "-l", "de-en", "--dest", tmp_path / "b")
    assert_user_error(r, 4, "de-en.txt.zip: the connection was cut 3 times",
                      "run again to resume")
    assert files(tmp_path / "b") == [] and files(cached) == [".de-en.txt.zip.part"]
    server = opus()
    assert cli("data", "opus", CORPUS, "-l", "de-en", "--dest", tmp_path / "b").code == 0
    assert server.ranged() and files(cached) == ["de-en.txt.zip"]


def test_a_404_and_a_server_that_never_answers_are_one_line(opus, cli, tmp_path, monkeypatch):
    from mt import download

    server = opus()
    del server.files[OpusServer.path("moses")]
    r = cli("data", "opus", CORPUS, "-l", "de-en", "--dest", tmp_path / "o")
    assert_user_error(r, 4, "de-en.txt.zip: HTTP 404 Not Found")
    monkeypatch.setattr(download, "TIMEOUT", 0.5)
    opus(silent=True)
    r = cli("data", "opus", CORPUS, "-l", "de-en", "--dest", tmp_path / "o")
    assert_user_error(r, 4, "cannot ask the OPUS API", "timed out")
    monkeypatch.setenv("MT_OPUS_API", "http://127.0.0.1:9/opusapi")  # the discard port
    assert_user_error(cli("data", "opus", CORPUS, "-l", "de-en", "--dest", tmp_path / "o"), 4,
                      "cannot ask the OPUS API", "Connection refused")
    assert not (tmp_path / "o").exists()


def test_a_wrong_size_or_a_damaged_archive_is_refused_and_not_kept(opus, cli, tmp_path):
    cached = tmp_path / "cache" / "opus" / CORPUS / VERSION / "de-en.txt.zip"
    opus(size_kib=999)
    r = cli("data", "opus", CORPUS, "-l", "de-en", "--dest", tmp_path / "o")
    assert_user_error(r, 4, "de-en.txt.zip: ", "but OPUS lists 999 KiB", "removed: run again")
    assert not cached.exists() and not (tmp_path / "o").exists()
    opus(moses=moses_zip(DE, EN[:-1]))
    r = cli("data", "opus", CORPUS, "-l", "de-en", "--dest", tmp_path / "o")
    assert_user_error(r, 4, f"{CORPUS}.de-en.en ends after 4 lines, {CORPUS}.de-en.de goes on",
                      "removed: run again")
    assert files(tmp_path / "o") == [] and not cached.exists()


def damaged(data: bytes, how: str) -> bytes:
    """data cut in half, or with a byte flipped in the middle of its first member's
    compressed bytes (a zip that opens, then fails its CRC or inflating)."""
    if how == "cut":
        return data[:len(data) // 2]
    at = 30 + len(f"{CORPUS}.de-en.de") + 5  # past the first local header
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


@pytest.mark.parametrize("form, how", [("moses", "cut"), ("moses", "flipped"), ("tmx", "cut"),
                                       ("moses", "not a zip")])
def test_a_damaged_archive_in_the_cache_is_removed_and_fetched_again(opus, cli, tmp_path,
                                                                     form, how):
    """errors.md: a damaged archive is removed, never used (again): the next run fetches it."""
    good = opus(size_kib=0)  # the API lists no size: the archive's reading finds the damage
    ending = FORMS[form]
    cached = tmp_path / "cache" / "opus" / CORPUS / VERSION / f"de-en{ending}"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"PK not a zip" if how == "not a zip" else
                       damaged(good.archives[form], how))
    r = cli("data", "opus", CORPUS, "-l", "de-en", "--form", form, "--dest", tmp_path / "o")
    assert_user_error(r, 4, str(cached), "removed: run again")
    assert not cached.exists() and files(tmp_path / "o") == []
    assert [p for p, _ in good.requests if "opusapi" not in p] == []  # the cached one was read
    r = cli("data", "opus", CORPUS, "-l", "de-en", "--form", form, "--dest", tmp_path / "o")
    assert r.code == 0, r.err
    assert cached.read_bytes() == good.archives[form] and json.loads(r.out)["pairs"] >= 5


@pytest.mark.parametrize("key, value", [("version", "../../../escaped"), ("version", "v1/x"),
                                        ("corpus", "ABSOLUTE"), ("corpus", ".."),
                                        ("corpus", None)])
def test_an_api_record_whose_names_would_leave_the_cache_writes_nothing(opus, cli, tmp_path,
                                                                        key, value):
    """A hostile or broken API answer names the folders the archive goes into and the files
    written: a name that would lead out of them is refused before anything is fetched."""
    server = opus()
    value = str(tmp_path / "escaped") if value == "ABSOLUTE" else value
    record = server.record
    server.record = lambda *a, **k: {**record(*a, **k), key: value}
    r = cli("data", "opus", CORPUS, "-l", "de-en", "--dest", tmp_path / "o")
    assert_user_error(r, 4, "the OPUS API's record of", "not a plain file or folder name",
                      "not used")
    assert [path for path, _ in server.requests if "opusapi" not in path] == []
    assert list(tmp_path.iterdir()) == [] and not (tmp_path / "escaped").exists()


def test_a_pair_that_is_not_two_plain_codes_is_a_usage_error(opus, cli, tmp_path):
    opus()
    r = cli("data", "opus", CORPUS, "-l", "../../de-en", "--dest", tmp_path / "o")
    assert_user_error(r, 2, "Invalid value for '-l'", "give SRC-TGT")
    assert list(tmp_path.iterdir()) == []
