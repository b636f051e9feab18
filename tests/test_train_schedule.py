"""mt/train/schedule.py: the learning-rate schedules, and a decay to a time budget in a run."""

import json

import pytest

from conftest import CONFIG, exact_sets
from mt.checkpoint import load_checkpoint
from mt.commands.train import train
from mt.train.schedule import lr_at


def test_lr_warmup_then_inverse_sqrt():
    assert lr_at(50, 1.0, 100) == pytest.approx(0.5)
    assert lr_at(100, 1.0, 100) == pytest.approx(1.0)
    assert lr_at(400, 1.0, 100) == pytest.approx(0.5)
    assert lr_at(7, 1.0, 0) == 1.0


@pytest.mark.parametrize("schedule", ["cosine", "linear"])
def test_lr_decays_to_zero_at_max_steps(schedule):
    assert lr_at(50, 1.0, 100, schedule, 1100) == pytest.approx(0.5)  # the same warmup
    assert lr_at(100, 1.0, 100, schedule, 1100) == pytest.approx(1.0)
    assert lr_at(600, 1.0, 100, schedule, 1100) == pytest.approx(0.5)  # half the decay
    assert lr_at(1100, 1.0, 100, schedule, 1100) == pytest.approx(0.0, abs=1e-12)
    assert lr_at(2000, 1.0, 100, schedule, 1100) == pytest.approx(0.0, abs=1e-12)
    curve = [lr_at(s, 1.0, 100, schedule, 1100) for s in range(100, 1101, 50)]
    assert all(a > b for a, b in zip(curve, curve[1:]))
    # a time budget spent sooner ends the decay sooner; one spent later changes nothing
    assert lr_at(600, 1.0, 100, schedule, 1100, time_done=1.0) == pytest.approx(0.0, abs=1e-12)
    assert lr_at(600, 1.0, 100, schedule, 0, time_done=0.5) == pytest.approx(0.5)
    assert lr_at(600, 1.0, 100, schedule, 1100, time_done=0.2) == pytest.approx(0.5)
    # cosine stays above the line in the first half of the decay, below it in the second
    if schedule == "cosine":
        assert lr_at(350, 1.0, 100, "cosine", 1100) > lr_at(350, 1.0, 100, "linear", 1100)
        assert lr_at(850, 1.0, 100, "cosine", 1100) < lr_at(850, 1.0, 100, "linear", 1100)


@pytest.mark.slow
def test_decay_to_a_time_budget_reaches_zero_when_it_is_spent(toy300, tmp_path):
    """schedule: linear with max_minutes and no step limit: the learning rate falls with the
    time spent, step after step, and is all but zero at the budget's end."""
    run = tmp_path / "run"
    train(CONFIG, exact_sets(toy300, "train.max_epochs=10000", "train.max_minutes=0.05",
                             "train.schedule=linear", "train.warmup=2", "train.lr=1e-3",
                             "train.log_every=1"), run, "cpu", False)
    events = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    lrs = [e["lr"] for e in events if e["event"] == "train" and e["step"] >= 2]
    assert len(lrs) >= 5, lrs
    assert all(a >= b for a, b in zip(lrs, lrs[1:])) and lrs[0] > lrs[-1], lrs
    assert lrs[-1] < 0.1e-3, lrs
    assert load_checkpoint(run / "last.pt")["progress"]["warmup_s"] > 0
