"""mt/errors.py: each error class has its own exit code, as docs/errors.md's table lists them,
and an OSError becomes one line that says what to do when that is clear."""

import errno
import re

import mt.errors
from conftest import ROOT


def test_every_exit_code_is_in_the_docs_table():
    classes = [c for c in vars(mt.errors).values()
               if isinstance(c, type) and issubclass(c, mt.errors.MTError)]
    codes = {c.__name__: c.exit_code for c in classes}
    table = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert set(codes.values()) <= documented, (codes, documented)
    # One code per class, but for a vocabulary's, which is its checkpoint's (exit 5)
    own = {name: code for name, code in codes.items() if name != "VocabError"}
    assert len(set(own.values())) == len(own), own
    assert codes["VocabError"] == codes["CheckpointError"] == 5


def test_os_errors_say_where_what_and_what_to_do():
    full = OSError(errno.ENOSPC, "No space left on device", "out.txt")
    assert mt.errors.os_error_message(full) == (
        "out.txt: No space left on device; free some disk space and try again")
    odd = OSError(errno.EIO, "Input/output error")
    assert mt.errors.os_error_message(odd, "disk") == "disk: Input/output error"
