"""mt/train/loop.py: the Trainer's loop. What it is built on (the torch floor: fused Adam,
GradScaler), when it validates (eval_epochs), what it does with a skipped update (logged; after
MAX_BAD_STEPS in a row, last.pt saved and the run stopped), and a signal: last.pt saved, and
--resume continues.

The pieces it calls have their own files: test_train_step.py (one update, accumulation,
autocast), test_train_run_dir.py, test_train_state.py (exact resume), test_train_stopping.py,
test_train_schedule.py, test_train_distributed.py (several ranks), test_train_ema.py.
"""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import (
    CONFIG,
    ROOT,
    TINY,
    Result,
    assert_user_error,
    corpus,
    exact_sets,
    small_config,
)
from mt.checkpoint import load_checkpoint
from mt.commands.train import train
from mt.config import load_config
from mt.errors import RunError
from mt.train.loop import Trainer
from mt.train.step import MAX_BAD_STEPS


def test_torch_floor_is_one_the_code_runs_on():
    """pyproject's torch floor admits no version without fused Adam on CPU (2.4) or
    torch.amp.GradScaler("cuda") (2.3),
    and the installed torch satisfies it. (Newer probes, such as is_bf16_supported's
    including_emulation, are used where present: mt.device.)"""
    text = (ROOT / "pyproject.toml").read_text()
    floor = tuple(int(x) for x in re.search(r'"torch>=(\d+)\.(\d+)', text).groups())
    assert floor >= (2, 4), floor  # fused Adam on CPU came in 2.4
    installed = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    assert installed >= floor
    assert torch.amp.GradScaler("cuda", enabled=False).state_dict() == {}
    w = torch.nn.Parameter(torch.ones(3))
    w.grad = torch.ones(3)
    torch.optim.Adam([w], lr=0.1, fused=True).step()
    assert torch.allclose(w.detach(), torch.full((3,), 0.9))


@pytest.mark.slow
def test_eval_epochs_false_validates_only_every_eval_every_steps(toy300, tmp_path):
    """Epochs of this corpus end between multiples of eval_every: with eval_epochs they add
    validations, without they add none (only the final one at the last step)."""
    steps = {}
    for flag in ("true", "false"):
        run = tmp_path / flag
        train(CONFIG, exact_sets(toy300, "train.max_steps=60", "train.eval_every=25",
                                 f"train.eval_epochs={flag}"), run, "cpu", False)
        lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        steps[flag] = [x["step"] for x in lines if x["event"] == "valid"]
    assert steps["false"] == [25, 50, 60]
    assert set(steps["true"]) > set(steps["false"])  # epoch ends (every ~25 steps) too


def nonfinite(net):
    return lambda *a, **kw: net(*a, **kw) * float("nan")


def test_nonfinite_loss_skips_the_update_is_logged_and_stops_the_run(tmp_path, capsys):
    cfg = load_config(CONFIG, [*TINY, f"data.dir={corpus(tmp_path)}"])
    trainer = Trainer(cfg, tmp_path / "run", "cpu")
    trainer.prepare_run_dir()
    trainer.load_data()
    trainer.build()
    batch = trainer.train_data.batches(cfg.train.max_tokens)[0]
    weights = lambda: {k: v.clone() for k, v in trainer.model.state_dict().items()}  # noqa: E731
    start, good_net = weights(), trainer.net

    trainer.net = nonfinite(good_net)
    for _ in range(MAX_BAD_STEPS - 1):
        assert math.isnan(trainer.step(batch))
    assert all(torch.equal(start[k], v) for k, v in weights().items())  # no update applied
    trainer.net = good_net
    assert math.isfinite(trainer.step(batch)) and trainer.bad_steps == 0  # a good step resets
    trained = weights()
    assert not all(torch.equal(start[k], v) for k, v in trained.items())

    trainer.net = nonfinite(good_net)
    with pytest.raises(RunError, match=f"not finite for {MAX_BAD_STEPS} steps in a row") as e:
        for _ in range(MAX_BAD_STEPS):
            trainer.step(batch)
    assert "last.pt" in str(e.value) and "train.lr" in str(e.value)
    saved = load_checkpoint(tmp_path / "run" / "last.pt")["model"]
    assert all(torch.equal(trained[k], v) and v.isfinite().all() for k, v in saved.items())
    events = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    skipped = [e for e in events if e["event"] == "nonfinite_loss"]
    assert len(skipped) == 2 * MAX_BAD_STEPS - 1
    assert skipped[-1]["in_a_row"] == MAX_BAD_STEPS
    assert skipped[-1]["skipped_steps"] == 2 * MAX_BAD_STEPS - 1
    assert "update skipped" in capsys.readouterr().err


def test_nonfinite_gradient_skips_the_update(tmp_path):
    cfg = load_config(CONFIG, [*TINY, f"data.dir={corpus(tmp_path)}", "train.clip_norm=0"])
    trainer = Trainer(cfg, tmp_path / "run", "cpu")
    trainer.prepare_run_dir()
    trainer.load_data()
    trainer.build()
    batch = trainer.train_data.batches(cfg.train.max_tokens)[0]
    start = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    param = next(trainer.model.parameters())
    hook = param.register_hook(lambda g: g * float("inf"))  # a finite loss, overflowing grads
    assert math.isnan(trainer.step(batch))
    hook.remove()
    assert all(torch.equal(start[k], v) for k, v in trainer.model.state_dict().items())
    events = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [e["event"] for e in events] == ["nonfinite_grad"]


def start_training(run: Path, data: Path) -> subprocess.Popen:
    args = ["train", str(CONFIG), "--out", str(run), "--device", "cpu",
            *small_config(data, "train.max_epochs=1000", "train.log_every=1")]
    return subprocess.Popen([sys.executable, "-m", "mt", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "MT_DEBUG": ""},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for_steps(p: subprocess.Popen, metrics: Path, steps: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert p.poll() is None, p.communicate()
        if metrics.exists() and sum('"train"' in line for line in metrics.open()) >= steps:
            return
        time.sleep(0.2)
    p.kill()
    pytest.fail("training made no progress")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_saves_last_checkpoint_and_resume_continues(cli, tmp_path, sig):
    run = tmp_path / "run"
    p = start_training(run, corpus(tmp_path, n=200))
    wait_for_steps(p, run / "metrics.jsonl", 3)
    p.send_signal(sig)
    out, err = p.communicate(timeout=300)
    r = Result(p.returncode, out, err)
    assert_user_error(r, 6, "interrupted at step", "last.pt", "--resume")
    step = int(re.search(r"interrupted at step (\d+)", err).group(1))
    state = load_checkpoint(run / "last.pt")
    assert state["step"] == state["progress"]["step"] == step >= 3
    if sig == signal.SIGINT:
        return  # the same path; resume once is enough
    r = cli("train", "--out", str(run), "--resume", "--device", "cpu",
            "--set", f"train.max_steps={step + 2}")
    assert r.code == 0, r.err
    assert f"at step {step}" in r.err
    assert json.loads(r.out.splitlines()[-1])["step"] == step + 2
