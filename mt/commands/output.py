"""What every command shares for files: checking paths before any work, and writing output to
stdout ('-') or atomically to a file, which appears only when complete."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from mt.errors import DataError, FileSystemError, OutputClosed, UsageError
from mt.textio import atomic_write


def check_input_path(src: str) -> None:
    """Fail on a missing input before the model is loaded; '-' is stdin."""
    if src != "-" and Path(src).is_dir():
        raise DataError(f"{src}: is a directory, expected a text file; give the input file")
    if src != "-" and not Path(src).is_file():
        raise DataError(f"{src}: input file not found; check the path")


def check_output_path(out: str) -> None:
    """Fail on an output path that cannot be written before any work; '-' is stdout."""
    if out == "-":
        return
    out_path = Path(out)
    if out_path.is_dir():
        raise DataError(f"{out}: is a directory; give a file name to write to")
    if not out_path.parent.is_dir():
        raise DataError(f"{out}: output directory {out_path.parent} does not exist; create it "
                        "or choose another path")
    if not os.access(out_path.parent, os.W_OK):
        raise FileSystemError(f"{out}: output directory {out_path.parent} is not writable; "
                              "check the permissions or choose another path")


def check_binary_output(out: str, what: str) -> None:
    """Refuse binary output to a terminal before any work (as curl does): its bytes would
    garble the screen. A file or a pipe takes it."""
    if out == "-" and sys.stdout.isatty():
        raise UsageError("translate", "'--output'", f"{what} is binary: give -o FILE, or pipe it")


def write_output(out: str, write: Callable[[TextIO], None]) -> None:
    """Call write(handle) on stdout for '-' (flushed line by line), else on a temporary file
    that replaces `out` once write returns."""
    if out == "-":
        stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="\n",
                                  line_buffering=True)
        try:
            write(stdout)
            stdout.detach()  # flush, but leave sys.stdout open
        except BrokenPipeError:  # the reader is gone (`| head`): not an error of ours
            raise OutputClosed("stdout closed by its reader") from None
        except BaseException:
            stdout.detach()  # else the wrapper, collected, closes sys.stdout under the caller
            raise
        return

    def to_file(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            write(f)

    atomic_write(Path(out), to_file)


def write_binary_output(out: str, data: bytes) -> None:
    """data to stdout for '-', else to `out`, which appears only when complete."""
    if out == "-":
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            raise OutputClosed("stdout closed by its reader") from None
        return
    atomic_write(Path(out), lambda tmp: Path(tmp).write_bytes(data))
