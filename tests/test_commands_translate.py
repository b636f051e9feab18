"""mt/commands/translate.py: `mt translate` on bad paths and bytes, under load, and when it is
interrupted: one output line per input line, and no partial output file; a terminal's lines
answered as they are typed. What each --format writes is in test_commands_formats.py."""

import errno
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import termios
import threading
import time

import pytest

import mt.translator
from conftest import ROOT, THREADS, assert_user_error, leftovers
from mt.commands.translate import PROMPT, translate_file
from mt.translator import CHUNK_LINES, Translator


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_input(cli, tmp_path, tiny_run):
    src = tmp_path / "in.txt"
    src.write_text("one\n")
    src.chmod(0)
    assert_user_error(cli("translate", tiny_run, "-i", src), 4, "in.txt", "Permission denied")


def test_translate_checks_paths_before_loading_the_model(cli, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("one two\n")
    run = tmp_path / "no-such-run"  # never reached: the path errors come first
    assert_user_error(cli("translate", run, "-i", tmp_path / "nope.txt"), 4, "nope.txt",
                      "not found")
    assert_user_error(cli("translate", run, "-i", tmp_path), 4, "is a directory")
    assert_user_error(cli("translate", run, "-i", src, "-o", tmp_path), 4, "is a directory")
    assert_user_error(cli("translate", run, "-i", src, "-o", tmp_path / "no" / "out.txt"), 4,
                      "output directory", "does not exist")


def test_translate_invalid_utf8_from_file_and_stdin(cli, tmp_path, tiny_run):
    # line 1 holds a U+FFFD that is valid UTF-8: not counted
    data = "one \ufffd two\n".encode() + b"\xff\xfe three\n\nfour \xc3\n"
    src = tmp_path / "in.txt"
    src.write_bytes(data)
    for args, stdin, name in ((["-i", src], None, str(src)), ([], data, "-")):
        r = cli("translate", tiny_run, *args, stdin=stdin)
        assert r.code == 0, r.err
        assert r.out.count("\n") == 4 and r.out.split("\n")[2] == "", r.out
        assert f"{name}: 2 line(s) had invalid UTF-8 (first at line 2)" in r.err


@pytest.mark.parametrize("option", ["--beam", "--max-len-b", "--min-len", "--batch-tokens"])
def test_an_integer_option_beyond_its_bound_is_exit_3(cli, tiny_run, option):
    for command in ("translate", "eval"):
        r = cli(command, tiny_run, option, "99999999999999999999", stdin=b"one two\n")
        assert_user_error(r, 3, f"{option} 99999999999999999999", "must be at most")


def big_input(n: int = 100_000) -> tuple[bytes, int, int]:
    """n lines, mostly empty or short, some not UTF-8, a few too long: (bytes, bad, long)."""
    words = "one two three four five six seven eight nine ten".split()
    lines, bad, long = [], 0, 0
    for i in range(n):
        if i % 1000 == 7:
            lines.append(b"\xff\xfe " + words[i % 10].encode())
            bad += 1
        elif i in (500, n // 2, n - 3):
            lines.append(" ".join(words * 40).encode())  # 400 tokens > 256 positions
            long += 1
        elif i % 1000 == 11:
            lines.append(" \t\x0b\x0c\u0085\u2028\u2029\u3000 ".encode())  # only whitespace
        elif i % 10 == 3:
            lines.append(" ".join(words[i % 7: i % 7 + 1 + i % 3]).encode())
        elif i % 100 == 9:
            lines.append("two\rthree\u2028four \x00 five".encode())
        else:
            lines.append(b"")
    return b"\n".join(lines) + b"\n", bad, long


def test_100k_lines_one_output_line_each(cli, tmp_path, tiny_run):
    data, bad, long = big_input()
    out = tmp_path / "out.txt"
    r = cli("translate", str(tiny_run), "-o", str(out), "--device", "cpu", stdin=data)
    assert r.code == 0, r.err
    assert f"-: {bad} line(s) had invalid UTF-8 (first at line 8)" in r.err
    assert f"{long} source line(s) longer than model.max_positions (256 tokens)" in r.err
    text = out.read_text(encoding="utf-8")
    outputs = text.split("\n")
    assert outputs.pop() == "" and len(outputs) == 100_000
    assert text.splitlines() == outputs  # no other line separator inside a line
    for src, hyp in zip(data.split(b"\n"), outputs):
        assert (hyp == "") == (src.decode("utf-8", "replace").strip() == "")
    assert leftovers(tmp_path) == []


def test_stdin_is_translated_while_it_is_still_being_written(tiny_run):
    p = subprocess.Popen([sys.executable, "-m", "mt", "translate", str(tiny_run)], cwd=ROOT,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got, first = [], threading.Event()

    def read():
        for line in p.stdout:
            got.append(line)
            first.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    p.stdin.write(b"one two\n" * CHUNK_LINES)
    p.stdin.flush()
    try:
        assert first.wait(timeout=300), "no output before the end of the input"
        assert p.poll() is None  # still running: stdin is open
    finally:
        p.stdin.write(b"three\n" * 10)
        p.stdin.close()
        reader.join(timeout=300)
        p.wait(timeout=60)
    assert p.returncode == 0, p.stderr.read()
    assert len(got) == CHUNK_LINES + 10


def test_crash_mid_file_leaves_no_partial_output(tmp_path, tiny_run, monkeypatch):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("one two\n" * 40)
    out.write_text("previous translations\n")
    monkeypatch.setattr(mt.translator, "CHUNK_LINES", 5)
    real = Translator.translate_stream

    def crashing(self, lines, *rest, **options):
        for i, hyp in enumerate(real(self, lines, *rest, **options)):
            if i == 23:
                raise RuntimeError("crash mid-file")
            yield hyp

    monkeypatch.setattr(Translator, "translate_stream", crashing)
    with pytest.raises(RuntimeError, match="crash mid-file"):
        translate_file(tiny_run, str(src), str(out))
    assert out.read_text() == "previous translations\n"
    assert leftovers(tmp_path) == []


def test_disk_full_mid_file_is_one_line_and_keeps_the_old_output(cli, tmp_path, tiny_run,
                                                                  monkeypatch):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("one two\n" * 10)
    out.write_text("previous translations\n")

    def full(self, lines, *rest, **options):
        yield "ein"
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Translator, "translate_stream", full)
    r = cli("translate", tiny_run, "-i", src, "-o", out)
    assert_user_error(r, 7, f"{out}: No space left on device", "free some disk space")
    assert out.read_text() == "previous translations\n"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("sig, code, word", [(signal.SIGTERM, 143, "terminated"),
                                             (signal.SIGINT, 130, "interrupted")])
def test_signal_mid_translation_leaves_no_partial_output(tmp_path, tiny_run, sig, code, word):
    out = tmp_path / "out.txt"
    out.write_text("previous translations\n")
    p = subprocess.Popen([sys.executable, "-m", "mt", "translate", str(tiny_run), "-o", str(out)],
                         cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env={**os.environ, "MT_DEBUG": ""},
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    p.stdin.write(b"one two\n" * 100)  # less than a chunk: it waits for more, mid-file
    p.stdin.flush()
    deadline = time.monotonic() + 300
    while not leftovers(tmp_path) and time.monotonic() < deadline:  # writing has begun
        assert p.poll() is None, p.communicate()
        time.sleep(0.1)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    assert word in err.decode() and "Traceback" not in err.decode()
    assert out.read_text() == "previous translations\n"
    assert leftovers(tmp_path) == []


def at_terminal(run, *args: str) -> tuple[subprocess.Popen, int]:
    """`mt translate RUN ARGS` with a terminal (a pty) as its stdin and controlling terminal,
    as when someone types into it: (the process, the terminal's side to type into)."""
    typed, tty = os.openpty()

    def own_terminal():  # after start_new_session's setsid: Ctrl-C typed is its SIGINT
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    p = subprocess.Popen([sys.executable, "-m", "mt", "translate", str(run), *args], cwd=ROOT,
                         stdin=tty, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={**os.environ, **THREADS, "MT_DEBUG": ""}, start_new_session=True,
                         preexec_fn=own_terminal)
    os.close(tty)
    return p, typed


def read_until(stream, end: bytes, timeout: float = 300) -> bytes:
    """Bytes from a pipe up to and including `end`, failing if they take longer than timeout."""
    data, deadline = b"", time.monotonic() + timeout
    while not data.endswith(end):
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"waited {timeout}s for {end!r}; got {data!r}"
        byte = os.read(stream.fileno(), 1)
        assert byte, f"closed before {end!r}; got {data!r}"
        data += byte
    return data


def test_lines_typed_at_a_terminal_are_answered_one_by_one(tiny_run):
    lines = ["Yesterday we saw forty two red dogs.", "", "I need seven hundred eleven books."]
    want = Translator.load(tiny_run).translate(lines)
    p, typed = at_terminal(tiny_run)
    try:
        for line, translation in zip(lines, want, strict=True):
            assert read_until(p.stderr, PROMPT.encode()).endswith(PROMPT.encode())
            os.write(typed, line.encode() + b"\n")
            # Its translation comes while the terminal is still open and nothing more is typed.
            assert read_until(p.stdout, b"\n").decode() == translation + "\n"
            assert p.poll() is None
        read_until(p.stderr, PROMPT.encode())
        os.write(typed, b"\x04")  # Ctrl-D: the end
        out, err = p.communicate(timeout=60)
    finally:
        os.close(typed)
    assert p.returncode == 0 and out == b"", err
    assert "Traceback" not in err.decode()

    p, typed = at_terminal(tiny_run, "--format", "jsonl")
    try:
        read_until(p.stderr, PROMPT.encode())
        os.write(typed, lines[0].encode() + b"\n")
        assert json.loads(read_until(p.stdout, b"\n"))["text"] == want[0]
        read_until(p.stderr, PROMPT.encode())
        os.write(typed, b"\x03")  # Ctrl-C: exit 130, as anywhere else
        _, err = p.communicate(timeout=60)
    finally:
        os.close(typed)
    assert p.returncode == 130 and "interrupted" in err.decode(), err
    assert "Traceback" not in err.decode()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_reader_that_stops_reading_ends_mt_translate_quietly(tiny_run, tmp_path, workers):
    """`mt translate ... | head -1`: exit 0 and nothing said, as when the input ended."""
    src = tmp_path / "in.txt"
    src.write_text("Today you have eight cats.\n" * 5000)
    p = subprocess.Popen([sys.executable, "-m", "mt", "translate", str(tiny_run), "-i", str(src),
                          "--workers", workers, "--threads", "1"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline().strip()
    p.stdout.close()  # as head does after its line
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0, err
    assert "error" not in err and "Traceback" not in err, err
