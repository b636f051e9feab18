"""The test sets sacreBLEU knows (WMT's news and general tasks, IWSLT, MTNT, ...), fetched by
sacreBLEU's own code: its DATASETS table (each set's URLs, MD5 checksums and language pairs),
its download, checksum and extraction, and its cache ($SACREBLEU, else ~/.sacrebleu). Around it,
what that code lacks for a command line: a timeout, and one-line errors that leave no damaged
file to be used the next time. And FLORES-200 (dev 997, devtest 1012 sentences in 204
languages), which sacreBLEU 2.6 does not list, as a dataset of sacreBLEU's own plain-text kind.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import http.client
import logging
import os
import re
import socket
import tarfile
import urllib.error
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from sacrebleu.dataset import DATASETS
from sacrebleu.dataset.plain_text import PlainTextDataset

from mt.corpora import language_pair
from mt.errors import DataError

TIMEOUT = 60.0  # seconds without a byte before a download is given up

FLORES_URL = "https://dl.fbaipublicfiles.com/nllb/flores200_dataset.tar.gz"
FLORES_LINES = {"flores200/dev": 997, "flores200/devtest": 1012}
FLORES_CODE = re.compile(r"[a-z]{3}_[A-Z][a-z]{3}")  # eng_Latn
FLORES_ABOUT = ("FLORES-200 {split} (NLLB Team et al., 2022; CC BY-SA 4.0): {n} sentences in "
                "204 languages, any two a pair, e.g. eng_Latn-deu_Latn; its tarball has no "
                "published checksum: the line counts are checked")
FLORES_CITATION = ("NLLB Team et al. No Language Left Behind: Scaling Human-Centered Machine "
                   "Translation. arXiv:2207.04672, 2022.")


def names() -> list[str]:
    """Every test set by name: sacreBLEU's, and FLORES-200's two splits."""
    return sorted(DATASETS) + sorted(FLORES_LINES)


def describe(name: str) -> tuple[str, list[str]]:
    """A test set's description and language pairs (FLORES-200: none listed, any two of its
    languages)."""
    if name in FLORES_LINES:
        return FLORES_ABOUT.format(split=name.split("/")[1], n=FLORES_LINES[name]), []
    ds = DATASETS[name]
    return " ".join(str(ds.description or "").split()), list(ds.langpairs)


def has_pair(name: str, pair: str) -> bool:
    """Whether the test set has the pair (FLORES-200: any two codes of its form)."""
    if name in FLORES_LINES:
        return all(FLORES_CODE.fullmatch(lang) for lang in pair.split("-")) and \
            pair.count("-") == 1
    return pair in describe(name)[1]


def dataset(name: str, pair: str):
    """sacreBLEU's Dataset for the test set and pair; an unknown one is a DataError."""
    if name in FLORES_LINES:
        return _flores(name, pair)
    if name not in DATASETS:
        close = difflib.get_close_matches(name, names(), n=3)
        raise DataError(f"unknown test set {name!r}" + (f"; did you mean {', '.join(close)}?"
                        if close else "") + " (`mt data sacrebleu --list` lists them)")
    ds = DATASETS[name]
    if pair not in ds.langpairs:
        raise DataError(f"{name} has no {pair}; it has {', '.join(ds.langpairs)}")
    return ds


def fetch(name: str, pair: str) -> tuple[Path, list[Path]]:
    """The test set's source file and reference files (one or more) in sacreBLEU's cache,
    downloaded, checked and extracted by sacreBLEU first if missing."""
    ds = dataset(name, pair)
    with _guarded(ds, name):
        if name in FLORES_LINES:
            ds.maybe_download()
            _check_flores_languages(ds, pair)
            os.makedirs(ds._outdir, exist_ok=True)  # sacreBLEU makes it beside its raw/
        return Path(ds.get_source_file(pair)), [Path(p) for p in ds.get_reference_files(pair)]


def expected_lines(name: str) -> int | None:
    return FLORES_LINES.get(name)


class _Flores(PlainTextDataset):
    """sacreBLEU's plain-text kind, its raw/ folder and tarball shared by both splits."""

    def __init__(self, name: str, **kwargs):
        super().__init__(name, **kwargs)
        self._rawdir = os.path.join(os.path.dirname(self._outdir), "raw")

    def _get_tarball_filename(self, url: str) -> str:
        return os.path.basename(url)


def _flores(name: str, pair: str) -> _Flores:
    try:
        langs = language_pair(pair)
    except ValueError:
        langs = ()
    if not all(FLORES_CODE.fullmatch(lang) for lang in langs) or len(langs) != 2:
        raise DataError(f"{name}: -l {pair}: give two FLORES-200 codes, like eng_Latn-deu_Latn")
    split = name.split("/")[1]
    return _Flores(name, data=[FLORES_URL], md5=None, citation=FLORES_CITATION,
                   description=describe(name)[0],
                   langpairs={pair: [f"flores200_dataset/{split}/{lang}.{split}"
                                     for lang in langs]})


def _check_flores_languages(ds, pair: str) -> None:
    for path in ds.langpairs[pair]:
        if not os.path.isfile(os.path.join(ds._rawdir, path)):
            folder = os.path.join(ds._rawdir, os.path.dirname(path))
            have = sorted(p.split(".")[0] for p in os.listdir(folder)) if os.path.isdir(
                folder) else []
            lang = os.path.basename(path).split(".")[0]
            raise DataError(f"FLORES-200 has no {lang}" + (
                f"; it has {', '.join(have[:8])}, ... ({len(have)} languages)" if have else
                f" ({folder} is missing: remove {ds._rawdir} and run again)"))


@contextlib.contextmanager
def _guarded(ds, name: str) -> Iterator[None]:
    """sacreBLEU's download with a timeout, its logging silenced (its errors become one
    DataError), and a tarball that failed (cut short, wrong checksum, not extractable)
    removed, since sacreBLEU would otherwise take it as downloaded next time."""
    timeout, log = socket.getdefaulttimeout(), logging.getLogger("sacrebleu")
    socket.setdefaulttimeout(TIMEOUT)  # its urlopen has none: a silent server would hang
    log.disabled = True
    urls = ", ".join(ds.data or [])
    try:
        yield
    except SystemExit:  # how sacreBLEU ends on a wrong MD5, after logging it
        bad = _remove_failed(ds)
        raise DataError(f"{name}: checksum mismatch for {urls} ({'; '.join(bad)}): the download "
                        "is damaged or the file was changed at its source; removed: run again"
                        ) from None
    except urllib.error.HTTPError as e:
        _remove_failed(ds)
        raise DataError(f"{name}: {urls}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, TimeoutError,
            ConnectionError) as e:
        _remove_failed(ds)
        raise DataError(f"{name}: cannot download {urls} "
                        f"({getattr(e, 'reason', None) or e or type(e).__name__}); nothing of it "
                        "was kept: run again") from None
    except (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError) as e:
        _remove_failed(ds, always=True)
        raise DataError(f"{name}: {urls}: not a readable archive ({e}); removed: run "
                        "again") from None
    finally:
        socket.setdefaulttimeout(timeout)
        log.disabled = False


def _remove_failed(ds, always: bool = False) -> list[str]:
    """Remove the test set's downloaded archives that are empty or fail their checksum (all of
    them if always); what was wrong with each."""
    found = []
    for url, md5 in zip(ds.data or [], ds.md5 or [None] * len(ds.data or [])):
        path = Path(ds._rawdir) / ds._get_tarball_filename(url)
        if not path.is_file():
            continue
        got = hashlib.md5(path.read_bytes()).hexdigest() if path.stat().st_size else None
        if always or got is None or (md5 is not None and got != md5):
            found.append(f"MD5 {got}, expected {md5}" if got and md5 else "empty")
            path.unlink()
    return found
