"""OPUS (https://opus.nlpl.eu): parallel corpora for hundreds of language pairs, found through
the OPUS API and read from their Moses form (a zip of one plain file per language) or their
TMX form (gzipped XML).

The API is what opustools' opus_get asks (Helsinki-NLP/OpusTools, opustools/opus_get.py):
GET https://opus.nlpl.eu/opusapi?corpus=Europarl&source=de&target=en&preprocessing=moses
&version=latest answers {"corpora": [{"corpus": "Europarl", "version": "v8", "source": "de",
"target": "en", "preprocessing": "moses", "latest": "True", "alignment_pairs": 1961119,
"size": 206840, "url": "https://object.pouta.csc.fi/OPUS-Europarl/v8/moses/de-en.txt.zip",
...}]}: size in KiB, pairs named in alphabetical order whatever the direction asked. A Moses
zip holds {Corpus}.{l1}-{l2}.{l1} and .{l2} (line i of one translating line i of the other),
README (the corpus, its release, the article to cite) and LICENSE; a TMX holds one <tu> per
pair, a <tuv xml:lang="de"><seg>...</seg></tuv> per language.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import urllib.parse
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

from mt.download import DownloadError, read_url
from mt.errors import DataError
from mt.l10n import tmx

API = "https://opus.nlpl.eu/opusapi"
FORMS = {"moses": ".txt.zip", "tmx": ".tmx.gz"}  # preprocessing -> its file's ending
# What every OPUS README asks its users to cite.
CITATION = ("J. Tiedemann, 2012, Parallel Data, Tools and Interfaces in OPUS. In Proceedings "
            "of the 8th International Conference on Language Resources and Evaluation (LREC "
            "2012)")
NOTES = ("README", "LICENSE")  # what a Moses zip says of the corpus, kept beside it


def api() -> str:
    """The API's address: $MT_OPUS_API (a mirror), else OPUS's."""
    return os.environ.get("MT_OPUS_API", API)


class DamagedArchive(DataError):
    """An archive in the cache that cannot be read whole: the caller removes it, so that the
    next run fetches it again instead of failing on it again."""


@dataclass(frozen=True)
class Release:
    """One file of one corpus release, as the API lists it."""

    corpus: str
    version: str
    form: str  # moses or tmx
    url: str
    size_kib: int  # 0: not listed
    pairs: int  # alignment pairs (more than a Moses or TMX file holds: some are not 1-1)
    record: dict  # the API's whole answer for it

    @property
    def file_name(self) -> str:
        return Path(urllib.parse.urlsplit(self.url).path).name


def find(corpus: str, langs: tuple[str, str], version: str = "latest",
         form: str = "moses") -> Release:
    """The file of `corpus` for the pair langs (either direction) in `form`; a corpus, version
    or pair OPUS does not have is a DataError naming the corpora that have the pair."""
    records = _query(corpus=corpus, version=version, form=form, langs=langs)
    if not records:
        have = sorted({r["corpus"] for r in releases(langs, form)}, key=str.lower)
        pair = "-".join(langs)
        raise DataError(f"OPUS has no {corpus} {version} for {pair} in {form} form; " + (
            f"corpora with {pair}: {', '.join(have)}" if have else
            f"it has no corpus for {pair}: check the language codes (OPUS's, like pt_br)"))
    r = records[0]
    try:
        return Release(r.get("corpus"), str(r.get("version", version)), form, r["url"],
                       int(r.get("size") or 0), int(r.get("alignment_pairs") or 0), r)
    except (TypeError, ValueError):  # a broken answer: a size that is not a number
        raise DataError(f"{api()}: the OPUS API's record of {corpus} {version} has a size "
                        "or pair count that is not a number; not used") from None


def releases(langs: tuple[str, str], form: str = "moses") -> list[dict]:
    """The latest release of every corpus that has the pair, as the API lists them."""
    return _query(version="latest", form=form, langs=langs)


def _query(version: str, form: str, langs: tuple[str, str], **params: str) -> list[dict]:
    """The API's records for the pair in form (its file, not others the API adds)."""
    a, b = sorted(langs)
    query = {**params, "source": a, "target": b, "preprocessing": form, "version": version}
    url = f"{api()}?{urllib.parse.urlencode(query)}"
    try:
        answer = json.loads(read_url(url))
    except DownloadError as e:
        raise DataError(f"cannot ask the OPUS API ({url}): {e}; set MT_OPUS_API for a "
                        "mirror") from None
    except ValueError:
        raise DataError(f"{url}: the OPUS API's answer is not JSON") from None
    records = answer.get("corpora") if isinstance(answer, dict) else None
    if not isinstance(records, list):
        raise DataError(f"{url}: the OPUS API's answer has no list of corpora")
    return [r for r in records if isinstance(r, dict) and isinstance(r.get("url"), str)
            and r["url"].endswith(FORMS[form]) and {r.get("source"), r.get("target")} == {a, b}]


def check_size(path: Path, release: Release) -> None:
    """The file is the size the API lists (to its KiB), when it lists one."""
    got = path.stat().st_size
    if release.size_kib and abs(got / 1024 - release.size_kib) > 1:
        raise DamagedArchive(f"{path}: {got:,} bytes, but OPUS lists {release.size_kib:,} KiB "
                             f"for {release.url}: the file is damaged or incomplete")


def moses_pairs(path: Path, langs: tuple[str, str]) -> Iterator[tuple[str, str]]:
    """The pairs of a Moses zip, streamed from its two members (bytes that are not UTF-8 kept
    as they are, for the readers of the written files to count)."""
    with _archive(path) as z:
        members = [_member(z, path, lang, langs) for lang in langs]
        with z.open(members[0]) as a, z.open(members[1]) as b:
            sides = [io.TextIOWrapper(f, encoding="utf-8", errors="surrogateescape", newline="\n")
                     for f in (a, b)]
            for n, (s, t) in enumerate(zip_longest(*sides), 1):
                if s is None or t is None:
                    ended, other = members[t is None], members[s is None]
                    raise DamagedArchive(f"{path}: {ended} ends after {n - 1} lines, {other} "
                                         "goes on: the archive is damaged")
                yield s.rstrip("\n"), t.rstrip("\n")


def moses_notes(path: Path) -> dict[str, bytes]:
    """The README and LICENSE a Moses zip holds (those it has)."""
    with _archive(path) as z:
        names = set(z.namelist())
        return {name: z.read(name) for name in NOTES if name in names}


@contextmanager
def _archive(path: Path) -> Iterator[zipfile.ZipFile]:
    """The zip, open; what fails while it is read (opening it, a member's header, its CRC,
    its inflating) is one DamagedArchive."""
    try:
        with zipfile.ZipFile(path) as z:
            yield z
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:  # not the disk's OSErrors
        raise DamagedArchive(f"{path}: not a readable zip archive ({e})") from None


def _member(z: zipfile.ZipFile, path: Path, lang: str, langs: tuple[str, str]) -> str:
    a, b = sorted(langs)
    ending = f".{a}-{b}.{lang}"
    found = [n for n in z.namelist() if n.endswith(ending)]
    if len(found) != 1:
        raise DataError(f"{path}: expected one file ending in {ending}, found "
                        f"{', '.join(found) or 'none'} (it has {', '.join(z.namelist())})")
    return found[0]


def tmx_pairs(path: Path, langs: tuple[str, str]) -> Iterator[tuple[str, str]]:
    """The pairs of a gzipped TMX, read as the `tmx` corpus format reads one (mt.l10n.tmx, a
    unit at a time); a unit without both languages is skipped. A segment's whitespace,
    line breaks included, becomes one space, so that a pair stays one line of each plain
    file."""
    wanted = [lang.lower() for lang in langs]
    try:
        with gzip.open(path) as f:
            for unit in tmx.units(f, str(path)):
                segs = {lang.lower(): text for lang, text in unit.items()}
                if all(lang in segs for lang in wanted):
                    yield segs[wanted[0]], segs[wanted[1]]
    except DataError as e:
        raise DamagedArchive(str(e)) from None
    except (OSError, EOFError, zlib.error) as e:
        raise DamagedArchive(f"{path}: cannot read ({e}): the file is damaged") from None
