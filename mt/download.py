"""Files fetched over HTTP(S), for `mt data` and `mt import hf`: streamed to disk in blocks,
resumed where a cut connection left them, their length checked, and renamed into place only
when whole (docs/data.md#downloads).

A download gathers in a hidden `.NAME.part` beside its target, which no reader of data ever
opens; a failure keeps it, so that the next try asks only for the rest (an HTTP Range request).
Failures are DownloadError, worded for the caller's own one-line error. Where a download goes
is built with `inside`, whose parts (a revision, a corpus's name and version) come from a user
or a server: each must be one plain name, or it is an UnsafePath.
"""

from __future__ import annotations

import http.client
import os
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from tqdm import tqdm

from mt.errors import FileSystemError, os_error_message

TIMEOUT = 30.0  # seconds without a byte before a connection is given up
ATTEMPTS = 3  # tries of one download, each resuming where the last was cut
BLOCK = 1 << 20


class DownloadError(Exception):
    """Why a download failed, in words, for the caller's own one-line error.

    status: the HTTP status of a server's refusal (404, ...), else None. reached: False when
    no answer came at all (no network, a refused connection, no answer within TIMEOUT)."""

    def __init__(self, problem: str, status: int | None = None, reached: bool = True):
        super().__init__(problem)
        self.status, self.reached = status, reached


class UnsafePath(ValueError):
    """A path part from a user, a server or a file that is not one plain name: it could lead
    out of the folder it was meant for. Its message names the part, for the caller's error."""


def inside(root: Path, *parts: str) -> Path:
    """root/parts, each part one plain name (not empty, not `.` or `..`, no `/`, `\\` or NUL:
    so neither absolute nor climbing) and the whole within root; UnsafePath else."""
    for part in parts:
        if not isinstance(part, str) or part in ("", ".", "..") or \
                any(c in part for c in "/\\\0"):
            raise UnsafePath(f"{part!r}: not a plain file or folder name (one that is not "
                             "empty, `.` or `..` and holds no `/`, `\\` or NUL)")
    path = Path(root, *parts)
    top = os.path.abspath(root)
    if os.path.commonpath([top, os.path.abspath(path)]) != top:  # the parts' check, checked
        raise UnsafePath(f"{path} is not inside {root}")
    return path


class _Cut(Exception):
    """The body stopped before its end: worth another try from where it stopped."""


def partial(target: Path) -> Path:
    """Where target's bytes gather until it is whole: hidden, beside it."""
    return target.with_name(f".{target.name}.part")


def download(url: str, target: Path, headers: Mapping[str, str] | None = None,
             desc: str | None = None) -> Path:
    """url into target, whole or not at all: resumed from an earlier try's bytes, retried
    from where a cut connection stopped (ATTEMPTS in all), its length checked against what the
    server announced. A progress bar (desc, default the file's name) on a terminal.

    A cut that persists keeps the bytes fetched (the next call resumes); a wrong length
    removes them. DownloadError for either, and for a server that refuses or never
    answers; FileSystemError when the disk refuses."""
    target = Path(target)
    part = partial(target)
    try:
        part.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FileSystemError(os_error_message(e, part.parent)) from None
    for attempt in range(1, ATTEMPTS + 1):
        try:
            _fetch(url, part, dict(headers or {}), desc or target.name)
            break
        except _Cut as e:
            if attempt == ATTEMPTS:
                raise DownloadError(f"the connection was cut {ATTEMPTS} times, last at "
                                    f"{_size(part):,} bytes ({e}); the bytes fetched are kept: "
                                    "run again to resume") from None
    try:
        with open(part, "rb") as f:
            os.fsync(f.fileno())
        os.replace(part, target)
    except OSError as e:
        raise FileSystemError(os_error_message(e, target)) from None
    return target


def read_url(url: str, headers: Mapping[str, str] | None = None) -> bytes:
    """A small answer (an API's JSON) whole, with the same timeout and DownloadErrors."""
    with _open(url, dict(headers or {})) as response:
        try:
            return response.read()
        except (http.client.HTTPException, OSError) as e:
            raise DownloadError(f"the answer was cut short ({_reason(e)})") from None


def _fetch(url: str, part: Path, headers: dict[str, str], desc: str) -> None:
    have = _size(part)
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        response = _open(url, headers)
    except DownloadError as e:
        if e.status != 416 or not have:
            raise
        part.unlink()  # the range starts at or past the file's end: it changed; start over
        return _fetch(url, part, {k: v for k, v in headers.items() if k != "Range"}, desc)
    with response:
        resumed = response.status == 206
        total = _total(response, have if resumed else 0, part)
        try:
            out = open(part, "ab" if resumed else "wb")
        except OSError as e:
            raise FileSystemError(os_error_message(e, part)) from None
        with out, tqdm(total=total, initial=have if resumed else 0, unit="B", unit_scale=True,
                       unit_divisor=1024, desc=desc, disable=None, file=sys.stderr,
                       dynamic_ncols=True) as bar:
            while block := _read(response):
                try:
                    out.write(block)
                except OSError as e:
                    raise FileSystemError(os_error_message(e, part)) from None
                bar.update(len(block))
    got = _size(part)
    if total is not None and got < total:  # http.client returns b"" at a closed connection
        raise _Cut(f"{got:,} of {total:,} bytes")
    if total is not None and got > total:
        part.unlink()
        raise DownloadError(f"the server sent {got:,} bytes where it announced {total:,}; "
                            "removed: run again")


def _open(url: str, headers: dict[str, str]) -> http.client.HTTPResponse:
    request = urllib.request.Request(url, headers={"User-Agent": "mt", **headers})
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as e:
        raise DownloadError(f"HTTP {e.code} {e.reason}", status=e.code) from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
        raise DownloadError(_reason(e), reached=False) from None


def _read(response: http.client.HTTPResponse) -> bytes:
    try:
        return response.read(BLOCK)
    except (http.client.HTTPException, OSError) as e:  # a reset, a timeout, a short chunk
        raise _Cut(_reason(e)) from None


def _total(response: http.client.HTTPResponse, start: int, part: Path) -> int | None:
    """The whole file's length: from Content-Range for a resumed answer, else Content-Length;
    None when the server does not say. A resumed answer that does not start at `start` is
    not used: the next try starts over."""
    if start:
        found = re.fullmatch(r"bytes (\d+)-\d+/(\d+)", response.headers.get("Content-Range", ""))
        if not found or int(found[1]) != start:
            part.unlink()
            raise _Cut(f"a resumed answer had Content-Range "
                       f"{response.headers.get('Content-Range')!r}")
        return int(found[2])
    length = response.headers.get("Content-Length")
    return int(length) if length and length.isdigit() else None


def _reason(e: BaseException) -> str:
    reason = getattr(e, "reason", None) or e
    return str(reason) or type(reason).__name__


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
