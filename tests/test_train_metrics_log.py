"""mt/train/metrics_log.py: one sink for metrics.jsonl and TensorBoard, and the reader."""

import json
import sys

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import ROOT, TINY
from mt.commands.train import train
from mt.errors import ConfigError
from mt.train.metrics_log import MetricsSink


def scalars(tb_dir) -> dict[str, list[tuple[int, float]]]:
    """Every scalar TensorBoard would show: tag -> [(step, value)]."""
    events = EventAccumulator(str(tb_dir))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)]
            for tag in events.Tags()["scalars"]}


def test_sink_writes_jsonl_and_every_numeric_field_to_tensorboard(tmp_path):
    sink = MetricsSink(tmp_path, tensorboard=True)
    records = [{"event": "train", "step": 10, "epoch": 0, "loss": 2.5, "nll": 2.25, "lr": 1e-3,
                "tok_per_s": 900, "grad_norm": 0.75, "elapsed_s": 1.0},
               {"event": "train", "step": 20, "epoch": 0, "loss": None, "lr": 2e-3,
                "tok_per_s": 950, "grad_norm": 0.5, "elapsed_s": 2.0},
               {"event": "valid", "step": 20, "val_loss": 2.0, "val_ppl": 7.39, "val_bleu": 12.5,
                "val_chrf": 30.25, "best": 12.5},
               {"event": "end", "step": 20, "reason": "max_steps", "val_bleu": 12.5}]
    for r in records:
        sink.write(dict(r))
    sink.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == records
    got = scalars(tmp_path / "tb")
    assert got["train/loss"] == [(10, 2.5)]  # None (a non-finite loss) is left out
    assert got["train/nll"] == [(10, 2.25)]
    assert [s for s, _ in got["train/lr"]] == [10, 20]
    assert got["train/lr"][1][1] == pytest.approx(2e-3)
    assert got["train/grad_norm"] == [(10, 0.75), (20, 0.5)]
    assert got["valid/bleu"] == [(20, 12.5)] and got["valid/chrf"] == [(20, 30.25)]
    assert got["valid/ppl"][0][1] == pytest.approx(7.39)
    assert not any(tag.endswith(("/step", "/epoch", "/elapsed_s")) for tag in got)
    assert not any(tag.startswith("end/") for tag in got)


@pytest.mark.slow
def test_training_with_tensorboard_logs_what_metrics_jsonl_has(tmp_path):
    out = tmp_path / "tb_run"
    sets = [*TINY, "train.max_steps=6", "train.log_every=2", "train.eval_every=3",
            "train.tensorboard=true"]
    train(ROOT / "configs" / "toy.yaml", sets, out, "cpu", False)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    got = scalars(out / "tb")
    for tag, event, key in [("train/loss", "train", "loss"), ("train/lr", "train", "lr"),
                            ("train/tok_per_s", "train", "tok_per_s"),
                            ("train/grad_norm", "train", "grad_norm"),
                            ("valid/loss", "valid", "val_loss"), ("valid/ppl", "valid", "val_ppl"),
                            ("valid/bleu", "valid", "val_bleu"),
                            ("valid/chrf", "valid", "val_chrf")]:
        expected = [(r["step"], r[key]) for r in records if r["event"] == event]
        assert [s for s, _ in got[tag]] == [s for s, _ in expected], tag
        assert [v for _, v in got[tag]] == pytest.approx([v for _, v in expected], rel=1e-6), tag
    assert [s for s, _ in got["train/loss"]] == [2, 4, 6]
    assert [s for s, _ in got["valid/bleu"]] == [3, 6]
    assert all(v > 0 for _, v in got["train/grad_norm"])


def test_tensorboard_without_the_package_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"mt\[tensorboard\]"):
        train(ROOT / "configs" / "toy.yaml", ["train.tensorboard=true"], tmp_path / "r", "cpu",
              False)
    assert not (tmp_path / "r").exists()  # refused before anything was written


def test_the_progress_bars_loss_says_which_steps_it_is_the_mean_of(tmp_path):
    """Read once a log interval, it can be up to train.log_every steps old: it says so (issue
    65: `loss 3.4773` at step 150, from steps 1-100)."""
    import torch

    from mt.train.distributed import Group
    from mt.train.metrics_log import TrainingLog
    from mt.train.state import Clock, Progress

    log = TrainingLog(tmp_path, False, Clock(), Group("cpu"))
    log.restart(0)
    for step, loss in ((100, 3.0), (200, 2.0)):
        log.add(torch.tensor([loss * 10, loss * 10, 10.0]))
        log.interval(Progress(step=step), 1e-3, torch.tensor(1.0))
        first = step - 99
        assert log.bar_loss == f"loss {loss} | nll {loss} (steps {first}-{step})"
    log.restart(500)  # a resumed run
    log.add(torch.tensor([10.0, 10.0, 10.0]))
    log.interval(Progress(step=520), 1e-3, torch.tensor(1.0))
    assert log.bar_loss.endswith("(steps 501-520)")
