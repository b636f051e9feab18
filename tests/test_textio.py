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


def test_undecodable_bytes_are_counted_and_a_valid_replacement_character_is_not(tmp_path, capsys):
    from mt.corpus_formats.tsv import iter_tsv
    from mt.filters import bad_utf8
    from mt.textio import Undecoded, iter_lines

    path = tmp_path / "in.txt"
    path.write_bytes("valid \ufffd\tsee\n".encode() + b"bad \xff\tside\n" + b"ok\t\xc3 both\n")
    lines = list(iter_lines(path))
    assert lines == ["valid \ufffd\tsee", "bad \ufffd\tside", "ok\t\ufffd both"]
    assert [isinstance(line, Undecoded) for line in lines] == [False, True, True]
    assert "in.txt: 2 line(s) had invalid UTF-8 (first at line 2)" in capsys.readouterr().err
    # a TSV line's sides: only the side that held the bad bytes is marked
    assert [(bad_utf8(s), bad_utf8(t)) for s, t in iter_tsv(path)] == [
        (False, False), (True, False), (False, True)]


def test_a_named_pipe_or_dev_stdout_is_written_not_replaced(tmp_path):
    """`-o /dev/stdout` (a link to a pipe or terminal) was renamed over: as root, /dev/stdout
    became a file. A path that is there but no file is written as it is."""
    import os
    import stat
    import threading

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    got = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_text()))
    reader.start()
    atomic_write(pipe, lambda p: Path(p).write_text("through\n"))
    reader.join(10)
    assert got == ["through\n"] and stat.S_ISFIFO(pipe.stat().st_mode)
    assert leftovers(tmp_path) == []
