"""mt/train/state.py: what last.pt carries for --resume (an exact resume, bit for bit; a
weights-only last.pt cannot resume) and which settings a resume may change."""

import shutil

import pytest
import torch

from conftest import CONFIG, TINY, assert_user_error, straight_and_resumed
from mt.checkpoint import load_checkpoint
from mt.config import load_config
from mt.train.state import resume_changes


@pytest.mark.slow
def test_resume_continues_exactly(tmp_path):
    """Train 2N steps straight, or N then --resume to 2N: the same weights, bit for bit."""
    common = [*TINY, "model.dropout=0.1", "train.eval_bleu=false", "train.metric=loss",
              "train.eval_every=1000"]
    a, b = straight_and_resumed(tmp_path, common, 24, 12)
    assert a["step"] == b["step"] == 24
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name
    c = load_checkpoint(tmp_path / "split" / "best.pt")
    assert set(c) == {"format", "model", "step", "config", "vocab", "files", "starters",
                      "lineage", "shortlist"}  # no training state


def test_resume_needs_the_training_state(cli, run_copy):
    shutil.copy(run_copy / "best.pt", run_copy / "last.pt")  # weights only
    r = cli("train", "--out", run_copy, "--resume", "--device", "cpu")
    assert_user_error(r, 5, "last.pt", "cannot resume")


def test_what_a_resume_may_change():
    """When to stop, how often to validate, log and save, speed and decoding; not what the
    resumed updates compute (nor, under a decay to zero, where the decay ends)."""
    old = load_config(CONFIG)
    allowed = ["train.max_steps=9", "train.max_epochs=2", "train.eval_every=7",
               "train.patience=3", "train.threads=1", "train.tensorboard=true", "decode.beam=4"]
    assert resume_changes(old, load_config(CONFIG, allowed)) == []
    refused = ["train.max_tokens=99", "train.seed=2", "data.max_len=30", "train.amp=none"]
    assert resume_changes(old, load_config(CONFIG, refused)) == [
        "data.max_len", "train.seed", "train.max_tokens", "train.amp"]
    cosine = ["train.schedule=cosine", "train.max_steps=500"]
    assert resume_changes(load_config(CONFIG, cosine),
                          load_config(CONFIG, [*cosine, "train.max_steps=900"])) == [
        "train.max_steps"]
