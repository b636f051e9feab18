"""mt/train/run_dir.py: the run directory's checks before any data is loaded (locked, refused,
left untouched, unwritable), the temporary files a killed save leaves, what a refused or failed
start takes back (Claim.undo), and the step checkpoints it keeps (train.keep_checkpoints)."""

import fcntl
import json
import os
from pathlib import Path

import pytest
import torch

from conftest import CONFIG, assert_user_error, exact_sets, saved_run, snapshot
from mt.checkpoint import load_checkpoint
from mt.commands.train import train


@pytest.mark.slow
def test_keep_checkpoints_then_mt_average_feeds_eval(cli, toy300, tmp_path):
    run = tmp_path / "run"
    train(CONFIG, exact_sets(toy300, "train.max_steps=8", "train.eval_every=2",
                             "train.keep_checkpoints=3"), run, "cpu", False)
    assert sorted(p.name for p in run.glob("ckpt.*.pt")) == ["ckpt.4.pt", "ckpt.6.pt",
                                                             "ckpt.8.pt"]
    r = cli("average", str(run), "--last", "2")
    assert r.code == 0, r.err
    assert r.out.strip() == str(run / "average.pt")
    mean = load_checkpoint(run / "average.pt")["model"]
    a, b = (load_checkpoint(run / f"ckpt.{s}.pt")["model"] for s in (6, 8))
    assert all(torch.allclose(mean[k], (a[k] + b[k]) / 2) for k in mean)
    r = cli("eval", str(run / "average.pt"), "--split", "val", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["step"] == 8
    # One file: moved away from its run directory, it still translates.
    (run / "average.pt").rename(tmp_path / "alone.pt")
    r = cli("translate", str(tmp_path / "alone.pt"), stdin=b"eight cats\n")
    assert r.code == 0 and r.out.count("\n") == 1, r.err


@pytest.mark.slow
def test_second_training_into_a_locked_directory_is_refused(cli, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with open(run / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running `mt train` holds it
        before = snapshot(run)
        r = cli("train", str(CONFIG), "--out", str(run), "--device", "cpu")
    assert_user_error(r, 6, str(run), "another training run")
    assert snapshot(run) == before


def test_locked_directory_refused_even_with_resume(cli, run_copy):
    with open(run_copy / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        before = snapshot(run_copy)
        r = cli("train", "--out", run_copy, "--resume", "--device", "cpu")
    assert_user_error(r, 6, "another training run")
    assert snapshot(run_copy) == before


def test_existing_run_is_refused_without_resume_and_left_untouched(cli, run_copy):
    before = snapshot(run_copy)
    r = cli("train", CONFIG, "--out", run_copy, "--device", "cpu")
    assert_user_error(r, 6, str(run_copy), "holds a run already", "--resume")
    assert snapshot(run_copy) == before


def test_resume_removes_temporary_checkpoints_left_by_a_kill(cli, run_copy):
    leftover = [run_copy / ".last.pt.k9x2a.tmp", run_copy / ".best.pt.3fz_q.tmp"]
    for tmp in leftover:
        tmp.write_bytes(b"PK\x03\x04 half a checkpoint")  # what kill -9 mid-save leaves
    others = {run_copy / ".notes.txt.ab12.tmp": b"not ours", run_copy / "notes.txt": b"mine"}
    for path, content in others.items():
        path.write_bytes(content)
    before = snapshot(run_copy)
    r = cli("train", CONFIG, "--out", run_copy, "--device", "cpu")  # refused: nothing touched
    assert_user_error(r, 6, "holds a run already")
    assert snapshot(run_copy) == before
    step = load_checkpoint(run_copy / "last.pt")["step"]
    r = cli("train", "--out", run_copy, "--resume", "--device", "cpu")
    assert r.code == 0, r.err
    assert "left by an interrupted save" in r.err
    assert not any(tmp.exists() for tmp in leftover)
    assert all(path.read_bytes() == content for path, content in others.items())
    assert load_checkpoint(run_copy / "last.pt")["step"] == step  # the run itself is intact


def test_unwritable_run_directory_is_reported_before_training(cli, tmp_path, monkeypatch):
    nowhere = ["--set", f"data.dir={tmp_path / 'no-data'}"]  # reading data would fail: it must
    a_file = tmp_path / "file"                                # not get that far
    a_file.write_text("x")
    assert_user_error(cli("train", CONFIG, "--out", a_file, *nowhere), 6, "not a directory")
    assert_user_error(cli("train", CONFIG, "--out", a_file / "run", *nowhere), 6,
                      "cannot create the run directory")
    read_only, access = tmp_path / "ro", os.access  # chmod would not stop root: pretend

    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != read_only
                        and access(path, mode))
    assert_user_error(cli("train", CONFIG, "--out", read_only, *nowhere), 6, "not writable")


def test_a_refused_start_takes_back_what_it_made_and_nothing_else(cli, tmp_path):
    """SentencePiece's size check comes with the token cache, after the run directory is
    made and locked: a new directory (parents included) goes; one that was there stays as it
    was; --resume into nowhere leaves nothing either."""
    too_big = ["--set", "data.tokenizer=sentencepiece", "--set", "data.vocab_size=100000"]
    new = tmp_path / "runs" / "new"
    r = cli("train", CONFIG, "--out", new, "--device", "cpu", *too_big)
    assert_user_error(r, 3, "data.tokenizer.vocab_size 100000 is too large")
    assert list(tmp_path.iterdir()) == []
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.yaml").write_text("data: {}\n")  # the user's own: not the run's to remove
    before = snapshot(mine)
    r = cli("train", mine / "config.yaml", "--out", mine, "--device", "cpu", *too_big)
    assert_user_error(r, 3, "data.tokenizer.vocab_size 100000 is too large")
    assert snapshot(mine) == before and [p.name for p in mine.iterdir()] == ["config.yaml"]
    r = cli("train", CONFIG, "--out", new, "--resume", "--device", "cpu")
    assert_user_error(r, 6, "nothing to resume")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_a_resume_that_fails_while_setting_up_leaves_the_run_as_it_was(cli, tmp_path,
                                                                        monkeypatch):
    run = saved_run(tmp_path / "run")  # no .lock: the one this run makes goes again
    before = snapshot(run)
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path / "file"))
    r = cli("train", "--out", run, "--resume", "--device", "cpu")
    assert_user_error(r, 7, "MT_CACHE_DIR")
    assert snapshot(run) == before
