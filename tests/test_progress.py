"""Progress bars: drawn on stderr when it is a terminal (a pseudo-terminal here), never when it
is piped into a file or another program, for the commands that show one."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from conftest import CONFIG, ROOT, THREADS, TOY


def stderr_of(args: list, terminal: bool) -> str:
    """`python -m mt ARGS`'s stderr: written to a pseudo-terminal, or to a pipe."""
    command = [sys.executable, "-m", "mt", *map(str, args)]
    env = {**os.environ, **THREADS}
    if not terminal:
        return subprocess.run(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=300).stderr
    leader, follower = pty.openpty()
    # a terminal of 24 rows of 100 columns: a new pty has 0, into which tqdm fits no bar
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the process closed its side
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert process.wait(300) == 0, out.decode(errors="replace")
    return out.decode(errors="replace")


def bar_drawn(err: str, desc: str) -> bool:
    """tqdm's bar: its description, then a count and a rate, redrawn after a carriage return."""
    return f"{desc}:" in err and "\r" in err and "/s]" in err


@pytest.mark.slow  # mt started four times, twice at a terminal: the fast tier's longest test
@pytest.mark.parametrize("args, desc", [
    (["data", "check", CONFIG], "check toy.train"),
    (["tokenize", "--lang", "en", "-i", TOY / "toy.train.en"], "tokenize"),
])
def test_a_bar_at_a_terminal_and_none_in_a_pipe(args, desc):
    assert bar_drawn(stderr_of(args, terminal=True), desc)
    piped = stderr_of(args, terminal=False)
    assert f"{desc}:" not in piped and "\r" not in piped


def test_translate_and_eval_draw_bars_only_at_a_terminal(tiny_run, tmp_path):
    out = tmp_path / "out.de"
    translate = ["translate", tiny_run, "-i", TOY / "toy.test.en", "-o", out]
    for args, desc in ((translate, "translate"), (["eval", tiny_run, "--split", "test"], "eval")):
        assert bar_drawn(stderr_of(args, terminal=True), desc), args
    # in a pipe: none (eval's bar is made as translate's, tokenize's and check's: disable=None)
    piped = stderr_of(translate, terminal=False)
    assert "translate:" not in piped and "\r" not in piped
