"""A directory built once, whoever asks at the same time: under a lock beside it, in a hidden
directory renamed into place when complete, so an interrupted build is never used."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TypeVar

from mt.errors import FileSystemError, RunError, os_error_message

T = TypeVar("T")


def locked_build(entry: Path, write: Callable[[Path], None], load: Callable[[], T | None]
                 ) -> T:
    """What load() finds at `entry`, after write(tmp) has made it when it finds nothing: under
    the entry's lock (another process may have built it meanwhile), in a hidden directory
    renamed into place when complete."""
    root = entry.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / f"{entry.name}.lock", "a")
    except OSError as e:
        raise FileSystemError(f"{root}: cannot write the token cache there ({e.strerror or e}); "
                              "set MT_CACHE_DIR to a writable directory") from None
    with lock:
        # One builder per entry; the flock dies with its process, so a killed one frees it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = load()
        if found is not None:  # built by another process while this one waited
            return found
        _remove_abandoned(root, entry)
        shutil.rmtree(entry, ignore_errors=True)  # damaged, if there at all
        tmp = root / f".{entry.name}.tmp{os.getpid()}"
        try:
            tmp.mkdir()
            write(tmp)
            os.rename(tmp, entry)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise FileSystemError(os_error_message(e)) from None
        except BrokenProcessPool:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RunError("a tokenizer process died while building the token cache (out of "
                           "memory?); nothing was kept; run again") from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    found = load()
    assert found is not None, entry
    return found


def _remove_abandoned(root: Path, entry: Path) -> None:
    """Temporary directories left by killed builders: no process holds their entry's lock."""
    for tmp in root.glob(".*.tmp*"):
        name = tmp.name[1:].rsplit(".tmp", 1)[0]
        if name == entry.name:  # this process holds that lock
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        with open(root / f"{name}.lock", "a") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # still being built
            shutil.rmtree(tmp, ignore_errors=True)
