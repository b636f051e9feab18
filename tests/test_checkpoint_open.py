"""One way to open a run (mt.checkpoint.open_run), seen through the commands that open one:
tokenize, info, and translate/eval of a CTranslate2 export."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, THREADS, assert_user_error

TEXT = "Heute haben Sie acht Katzen.\n\nGestern, hatten wir sechzig Häuser!\n"


def test_tokenize_a_one_file_checkpoint_outside_its_run_directory(cli, tiny_run, tmp_path):
    alone = tmp_path / "elsewhere" / "model.pt"
    alone.parent.mkdir()
    shutil.copyfile(tiny_run / "best.pt", alone)
    in_run = cli("tokenize", str(tiny_run), "--side", "tgt", stdin=TEXT.encode())
    moved = cli("tokenize", str(alone), "--side", "tgt", stdin=TEXT.encode())
    assert in_run.code == 0 and moved.code == 0, (in_run.err, moved.err)
    assert moved.out == in_run.out and len(moved.out.split("\n")) == 4
    back = cli("tokenize", str(alone), "--side", "tgt", "--detok", stdin=moved.out.encode())
    assert back.code == 0 and back.out == TEXT, back.err


def test_tokenize_a_run_directory_before_its_first_checkpoint(cli, tiny_run, tmp_path):
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    for name in ("config.yaml", "vocab.src.txt", "vocab.tgt.txt"):
        shutil.copyfile(tiny_run / name, fresh / name)
    r = cli("tokenize", str(fresh), stdin=b"Today, you have eight cats.\n")
    assert r.code == 0, r.err
    assert r.out.count("\n") == 1 and len(r.out.split()) > 5
    assert_user_error(cli("translate", str(fresh), stdin=b"one\n"), 5, "no checkpoint",
                      "train it first")


def test_info_reads_each_checkpoint_once(tiny_run):
    """`mt info RUN` as a user runs it, with torch.load counting the files it opens."""
    code = """
import collections, sys, torch
opened = collections.Counter()
load = torch.load
def counting(f, *args, **kwargs):
    opened[str(f)] += 1
    return load(f, *args, **kwargs)
torch.load = counting
sys.argv = ["mt", "info", sys.argv[1], "--json"]
from mt.cli import main
try:
    main()
finally:
    print(dict(opened), file=sys.stderr)
"""
    p = subprocess.run([sys.executable, "-c", code, str(tiny_run)], cwd=ROOT, text=True,
                       capture_output=True, env={**os.environ, **THREADS})
    assert p.returncode == 0, p.stderr
    opened = eval(p.stderr.strip().splitlines()[-1])
    assert opened == {str(tiny_run / "best.pt"): 1, str(tiny_run / "last.pt"): 1}
    assert json.loads(p.stdout)["checkpoint"] == str(tiny_run / "best.pt")


def test_an_export_opens_as_a_run_directory(cli, tiny_run, tmp_path):
    pytest.importorskip("ctranslate2")
    out = tmp_path / "export"
    r = cli("export", str(tiny_run), "--to", "ctranslate2", str(out))
    assert r.code == 0, r.err
    step = json.loads(r.out)["step"]
    ev = cli("eval", "--engine", "ctranslate2", str(out), "--json")
    assert ev.code == 0, ev.err
    assert json.loads(ev.out)["step"] == step > 0
    tok = cli("tokenize", str(out), "--side", "tgt", stdin=TEXT.encode())
    assert tok.code == 0 and tok.out == cli("tokenize", str(tiny_run), "--side", "tgt",
                                            stdin=TEXT.encode()).out
    r = cli("translate", "--engine", "ctranslate2", str(out), "--beam", "0", stdin=b"one\n")
    assert_user_error(r, 3, "decode.beam must be at least 1")
    assert r.err.startswith("error: --beam 0: "), r.err
