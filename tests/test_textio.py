"""mt/textio.py: atomic writes leave the old file or the new one, never half of one."""

import errno
from pathlib import Path

import pytest

from conftest import leftovers
from mt.errors import FileSystemError
from mt.textio import atomic_write


def test_atomic_write_failure_leaves_the_old_file_and_no_temp_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old\n")

    def crash(tmp):
        Path(tmp).write_text("half of the ne")
        raise RuntimeError("crash mid-write")

    def disk_full(tmp):
        Path(tmp).write_text("half of the ne")
        raise OSError(errno.ENOSPC, "No space left on device")

    def ctrl_c(tmp):
        Path(tmp).write_text("half of the ne")
        raise KeyboardInterrupt

    with pytest.raises(RuntimeError):
        atomic_write(target, crash)
    with pytest.raises(FileSystemError, match="out.txt: No space left on device"):
        atomic_write(target, disk_full)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, ctrl_c)
    assert target.read_text() == "old\n"
    assert leftovers(tmp_path) == []
    atomic_write(target, lambda tmp: Path(tmp).write_text("new\n"))
    assert target.read_text() == "new\n" and leftovers(tmp_path) == []
