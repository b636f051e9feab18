"""Files in and out, for every module above: text lines (plain or .gz) and atomic writes.

Reading errors are DataError, writing errors FileSystemError, each one line naming the file.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mt.errors import DataError, FileSystemError, os_error_message
from mt.log import warn


def read_error(e: OSError, path: str | Path) -> DataError:
    """The one-line error for a file that cannot be read."""
    if isinstance(e, FileNotFoundError):
        return DataError(f"{path}: file not found; check the path")
    if isinstance(e, IsADirectoryError):
        return DataError(f"{path}: is a directory, expected a text file; give a file")
    return DataError(f"{path}: cannot read ({e.strerror or e}); check the permissions")


def split_path(directory: str | Path, split: str, lang: str) -> Path:
    """`{dir}/{split}.{lang}`, or its `.gz` twin when only that exists."""
    plain = Path(directory) / f"{split}.{lang}"
    gz = plain.with_name(plain.name + ".gz")
    return gz if gz.exists() and not plain.exists() else plain


def file_identity(path: Path) -> list:
    """[absolute path, size, modification time]: what changes when the file does."""
    try:
        st = path.stat()
    except OSError as e:
        raise read_error(e, path) from None
    if stat.S_ISDIR(st.st_mode):
        raise read_error(IsADirectoryError(), path)
    return [str(path.resolve()), st.st_size, st.st_mtime_ns]


def open_text(path: str | Path) -> io.TextIOBase:
    """Open a UTF-8 text file, gzipped or not. Undecodable bytes become lone surrogates
    (surrogateescape), which iter_lines counts and replaces with U+FFFD.

    '-' is standard input. Lines end at '\\n' only, so line numbers match `wc -l` and other tools.
    """
    if str(path) == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape",
                                newline="\n")
    path = Path(path)
    try:
        if path.suffix == ".gz":
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8",
                                    errors="surrogateescape", newline="\n")
        return open(path, encoding="utf-8", errors="surrogateescape", newline="\n")
    except OSError as e:
        raise read_error(e, path) from None


def open_binary(path: str | Path) -> io.BufferedIOBase:
    """Open a file's bytes, gunzipped if it ends in .gz (XML, which says its own encoding)."""
    try:
        return gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb")
    except OSError as e:
        raise read_error(e, path) from None


# What surrogateescape makes of the bytes 0x80-0xff that are not UTF-8.
ESCAPED = re.compile("[\udc80-\udcff]")


class Undecoded(str):
    """A line (or a side of one) that had bytes that are not UTF-8, each now U+FFFD; a U+FFFD
    that was in the text, valid UTF-8, leaves a plain str."""


def undecoded(part: str, line: str) -> str:
    """part of line (a TSV side, say), still marked Undecoded if it holds one of line's U+FFFD."""
    return Undecoded(part) if isinstance(line, Undecoded) and "\ufffd" in part else part


def iter_lines(path: str | Path, warn_invalid: bool = True) -> Iterator[str]:
    """Lines without their line ending, undecodable bytes as U+FFFD in an Undecoded line; warns
    once with the count of such lines (unless warn_invalid is False: for a second pass over a
    file already read)."""
    bad = 0
    first_bad = 0
    with open_text(path) as f:
        try:
            for n, line in enumerate(f, 1):
                line = line.rstrip("\n").removesuffix("\r")
                if not line.isascii() and ESCAPED.search(line):
                    line = Undecoded(ESCAPED.sub("\ufffd", line))
                    bad += 1
                    first_bad = first_bad or n
                yield line
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            raise DataError(f"{path}: cannot read ({e}); is the file complete? Copy it "
                            "again") from None
    if bad and warn_invalid:
        warn(f"{path}: {bad} line(s) had invalid UTF-8 (first at line {first_bad}); "
             "bad bytes were replaced with U+FFFD")


def read_lines(path: str | Path) -> list[str]:
    return list(iter_lines(path))


def atomic_write(path: Path, write) -> None:
    """Call write(tmp_path), then rename over path: a crash never leaves a partial file there.
    A path that is there but not a file (/dev/stdout, a named pipe) is written as it is.

    The old file at path stays as it was until the new one is complete; on any failure the
    temporary file is removed. OS errors (permissions, a full disk) become FileSystemError
    naming path.
    """
    path = Path(path)
    if path.is_dir():
        raise FileSystemError(f"{path}: is a directory; give a file name")
    if path.exists() and not path.is_file():  # /dev/stdout, a pipe: written, never replaced
        try:
            return write(path)
        except OSError as e:
            raise FileSystemError(os_error_message(e, path)) from None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise FileSystemError(os_error_message(e, path)) from None
    try:  # from here on, any failure or signal removes tmp
        os.close(fd)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual permissions
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise FileSystemError(os_error_message(e, path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
