"""mt/commands/parallel.py: `mt translate --workers N` writes the same bytes as one process, in
every format, to a file and to stdout; usage errors; and no partial output file when
interrupted."""

import os
import signal
import subprocess
import sys
import time

import pytest

import mt.translator
from conftest import ROOT, THREADS, assert_user_error, leftovers, run_mt

WORDS = "one two three four five six seven eight nine ten".split()
FORMATS = {"text": [], "nbest": ["--beam", "3", "--nbest", "2"],
           "jsonl": ["--beam", "2", "--nbest", "2", "--format", "jsonl"]}


@pytest.mark.parametrize("fmt", FORMATS)
def test_workers_write_the_same_bytes_as_one_process(cli, tmp_path, tiny_run, monkeypatch, fmt):
    lines = ["" if i % 7 == 0 else " ".join(WORDS[(i + k) % 10] for k in range(i % 9 + 1))
             for i in range(160)]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(mt.translator, "CHUNK_LINES", 20)  # 8 chunks, more than are in flight
    outs = {}
    for workers in ("1", "2", *(["2 --threads 1"] if fmt == "text" else [])):
        out = tmp_path / f"out{len(outs)}.txt"
        to_file = cli("translate", tiny_run, "-i", src, "-o", out, "--workers", *workers.split(),
                      *FORMATS[fmt])
        assert to_file.code == 0, to_file.err
        outs[workers] = out.read_bytes()
        if fmt == "text" and workers == "2":  # stdout: the same writer whatever the format
            to_stdout = cli("translate", tiny_run, "-i", src, "--workers", *workers.split())
            assert to_stdout.code == 0, to_stdout.err
            assert to_stdout.out.encode("utf-8") == outs[workers]
    assert outs["2"] == outs["1"] == outs.get("2 --threads 1", outs["1"])
    if fmt == "nbest":  # indices run over the whole input, not restarting at each chunk
        assert outs["1"].decode().splitlines()[-1].split("\t")[0] == "159"
    else:
        assert outs["1"].count(b"\n") == 160


def test_a_term_no_output_can_hold_is_named_at_load_not_counted_over_workers(tmp_path,
                                                                            tiny_run):
    """With --unk show, a target term the vocabulary lacks cannot be kept: every line with its
    source term misses it (its jsonl "missing"), which is known when the glossary is read: each
    process names the term then, and the end's count of lines missing a term (the length
    limit's, the annotation's: summed over every chunk) leaves them out."""
    src, g = tmp_path / "in.txt", tmp_path / "g.tsv"
    src.write_text("".join("We have two cats.\n" if i % 3 else "You see dogs.\n"
                           for i in range(120)))
    g.write_text("cats\tZebras\n", encoding="utf-8")
    for workers in ("1", "2"):  # in a subprocess: the workers' warnings reach its stderr
        r = run_mt("translate", str(tiny_run), "-i", str(src), "--beam", "2", "--glossary",
                   str(g), "--workers", workers, "--format", "jsonl", "--unk", "show")
        assert r.code == 0 and sum('"missing": ["Zebras"]' in line
                                   for line in r.out.splitlines()) == 80, (workers, r.err)
        assert "(decode.unk show: left out): 'Zebras'" in r.err, (workers, r.err)
        assert "line(s) miss a glossary term" not in r.err, (workers, r.err)


def test_the_end_warning_names_the_terms_and_the_cause_of_the_modes_used():
    from mt.translator import unkept_message

    assert unkept_message(3, 64, {"constrain"}, ["zwei Katzen"]) == (
        "3 line(s) miss a glossary term ('zwei Katzen'): the length limit (decode.max_len_a "
        "and max_len_b, model.max_positions 64) left no room for it")
    assert unkept_message(1, 64, {"annotate"}, ["a", "b"]).endswith(
        "('a', 'b'): the model did not copy the annotated term (glossary_mode annotate)")


def test_workers_usage_errors(cli, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("one\n")
    assert_user_error(cli("translate", tmp_path, "-i", src, "--workers", "0"), 2, "--workers")
    assert_user_error(cli("translate", tmp_path, "-i", src, "--workers", "2", "--engine",
                          "ctranslate2"), 2, "--workers", "not with --engine ctranslate2")


def test_sigterm_with_workers_leaves_no_partial_output(tmp_path, tiny_run):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(" ".join(WORDS) + "\n" + "one two three\n" * 200_000)
    p = subprocess.Popen([sys.executable, "-m", "mt", "translate", str(tiny_run), "-i", str(src),
                          "-o", str(out), "--workers", "2"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env={**os.environ, **THREADS, "MT_DEBUG": ""})
    deadline = time.monotonic() + 300
    while not leftovers(tmp_path) and time.monotonic() < deadline:  # writing has begun
        assert p.poll() is None, p.communicate()
        time.sleep(0.1)
    time.sleep(5)  # the workers are started, and translating
    assert p.poll() is None, p.communicate()
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert "terminated" in err.decode() and "Traceback" not in err.decode(), err
    assert not out.exists() and leftovers(tmp_path) == []
