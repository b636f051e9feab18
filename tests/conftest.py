"""Shared fixtures: the toy corpus, a tiny model trained once per session, and a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

# One thread per process: tests start several processes, and oversubscribed OpenMP threads
# spin against each other on a small CI machine.
torch.set_num_threads(1)
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "data" / "toy"
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"

# A model small enough to train in seconds on the toy corpus and still learn it.
TINY = [
    "model.d_model=64", "model.n_heads=4", "model.n_enc_layers=2", "model.n_dec_layers=2",
    "model.d_ff=128", "model.dropout=0.0", "train.max_tokens=2048", "train.lr=3e-3",
    "train.warmup=100", "train.eval_every=100", "train.log_every=20", "train.max_epochs=4",
]


@pytest.fixture(autouse=True, scope="session")
def _token_cache(tmp_path_factory):
    """Training data is cached (mt.token_cache) in a temporary directory, not the user's
    ~/.cache/mt; subprocesses inherit it."""
    os.environ["MT_CACHE_DIR"] = str(tmp_path_factory.mktemp("token-cache"))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_mt(*args: str, input: str | bytes | None = None, cwd: Path = ROOT, env: dict | None = None,
           timeout: float = 600) -> Result:
    """Run `python -m mt ARGS` as a user would, returning exit code, stdout and stderr."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **THREADS, **(env or {})}
    full_env.pop("MT_DEBUG", None)
    if isinstance(input, str):
        input = input.encode("utf-8")
    p = subprocess.run([sys.executable, "-m", "mt", *args], input=input, capture_output=True,
                       cwd=cwd, env=full_env, timeout=timeout)
    return Result(p.returncode, p.stdout.decode("utf-8", "replace"),
                  p.stderr.decode("utf-8", "replace"))


def assert_user_error(r: Result, code: int | None = None, *needles: str) -> None:
    """A one-line error on stderr, a non-zero exit, and no traceback."""
    assert r.code != 0, r
    if code is not None:
        assert r.code == code, r
    assert "Traceback" not in r.err, r.err
    errors = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, r.err
    for n in needles:
        assert n in errors[0], (n, errors[0])


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """A tiny model trained for real on the toy corpus (shared by all tests that only read it)."""
    out = tmp_path_factory.mktemp("runs") / "tiny"
    args = ["train", str(ROOT / "configs" / "toy.yaml"), "--out", str(out), "--device", "cpu"]
    for s in TINY:
        args += ["--set", s]
    r = run_mt(*args)
    assert r.code == 0, r.err
    return out


def make_weights_only(run_dir: Path) -> None:
    """Rewrite a run's best.pt as checkpoints were before they carried config, vocabularies and
    tokenizer files: weights and step only, so mt reads those from the run directory."""
    from mt.checkpoint import load_checkpoint, save_checkpoint

    state = load_checkpoint(run_dir / "best.pt")
    save_checkpoint(run_dir / "best.pt", {"model": state["model"], "step": state["step"]})
