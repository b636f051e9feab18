"""mt/token_cache/entry.py, through `mt train`: what the token cache checks on load: a
damaged entry is rebuilt with one warning and trained on, and an unusable cache location is one
error and nothing else."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, TINY, assert_user_error, run_mt

pytestmark = pytest.mark.slow  # each test trains a tiny model through the CLI

TOY_CONFIG = str(ROOT / "configs" / "toy.yaml")


def train(run_dir: Path, cache_dir: Path, steps: int):
    args = ["train", TOY_CONFIG, "--out", str(run_dir), "--device", "cpu",
            "--set", f"train.max_steps={steps}", "--set", f"train.eval_every={steps}"]
    for s in TINY:
        args += ["--set", s]
    return run_mt(*args, env={"MT_CACHE_DIR": str(cache_dir)})


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:")]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A cache holding the toy corpus's entry, built once: each test damages a copy."""
    cache = tmp_path_factory.mktemp("built") / "cache"
    r = run_mt("prepare", TOY_CONFIG, env={"MT_CACHE_DIR": str(cache)})
    assert r.code == 0, r.err
    return cache


@pytest.fixture
def cache(built, tmp_path) -> Path:
    shutil.copytree(built, tmp_path / "cache")
    return tmp_path / "cache"


def entry(cache: Path) -> Path:
    [path] = [p for p in (cache / "tokens").iterdir() if p.is_dir()]
    return path


def test_ids_beyond_the_vocabulary_are_rebuilt_once_and_trained_on(cache, tmp_path):
    """Garbage of the right size in src.ids would index past the embedding."""
    ids = entry(cache) / "src.ids"
    garbage = np.random.default_rng(0).integers(0, 1 << 16, ids.stat().st_size // 2)
    garbage.astype(np.uint16).tofile(ids)
    r = train(tmp_path / "run", cache, steps=40)
    assert r.code == 0, r.err
    [warning] = warnings(r.err)
    assert "token cache entry is damaged" in warning and "beyond its vocabulary" in warning
    assert "rebuilding it" in warning and "Traceback" not in r.err
    vocab_size = len((entry(cache) / "vocab.src.txt").read_text(encoding="utf-8").splitlines())
    assert np.fromfile(entry(cache) / "src.ids", np.uint16).max() < vocab_size  # rebuilt
    assert (tmp_path / "run" / "best.pt").exists()
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    losses = [rec["loss"] for rec in records if rec["event"] == "train"]
    assert losses[-1] < losses[0] - 0.5, losses  # it learned from the rebuilt ids


@pytest.mark.parametrize("damage", ["sizes", "offsets"])
def test_a_damaged_entry_is_reported_once(cache, tmp_path, damage):
    offsets = entry(cache) / "tgt.offsets"
    if damage == "sizes":
        with open(entry(cache) / "src.ids", "ab") as f:
            f.write(b"\0\0")
        needle = "src arrays do not match meta.json"
    else:  # the right size, out of order
        a = np.fromfile(offsets, np.int64)
        a[1:-1] = a[1:-1][::-1]
        a.tofile(offsets)
        needle = "tgt.offsets do not run in order"
    r = train(tmp_path / "run", cache, steps=1)
    assert r.code == 0, r.err
    [warning] = warnings(r.err)
    assert needle in warning and "rebuilding it" in warning, warning


def test_a_cache_location_that_is_a_file_is_one_error(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    run_dir = tmp_path / "run"
    r = train(run_dir, not_a_dir, steps=1)
    assert_user_error(r, 7, "set MT_CACHE_DIR to a writable directory")
    assert warnings(r.err) == [], r.err


def test_a_failed_start_leaves_no_run_directory(tmp_path):
    """Trainer.prepare_run_dir makes (and locks) the run directory before the token cache is
    opened: the failed start takes it back, parents it made included, and nothing else."""
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    r = train(tmp_path / "runs" / "run", not_a_dir, steps=1)
    assert r.code == 7, r.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
