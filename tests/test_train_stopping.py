"""mt/train/stopping.py: the reasons a run ends (as metrics.jsonl's "end" record writes them)
and the decisions of Stopping: signal (a second one stops at once) and time budget (a run out
of time validates and saves; a resume counts the time spent), step limit, patience."""

import json
import signal
import time

import pytest

from conftest import CONFIG, ROOT, TINY, exact_sets, snapshot
from mt.checkpoint import load_checkpoint
from mt.commands.train import train
from mt.config import TrainConfig, load_config
from mt.errors import RunError
from mt.train.distributed import Group
from mt.train.loop import Trainer
from mt.train.state import Clock, Progress
from mt.train.stopping import Stopping, StopReason


def stopping(tmp_path, **train_settings) -> Stopping:
    return Stopping(TrainConfig(**train_settings), Clock(), Group("cpu"), tmp_path / "last.pt")


def test_reasons_are_the_strings_metrics_jsonl_writes():
    assert [r.value for r in StopReason] == ["max_epochs", "max_steps", "max_minutes",
                                             "patience", "signal"]
    assert StopReason("max_steps") is StopReason.MAX_STEPS


@pytest.mark.slow  # a real (tiny) training run
def test_the_end_record_of_a_run_holds_the_reasons_value(tmp_path):
    run = tmp_path / "run"
    sets = [*TINY, f"data.dir={ROOT / 'data' / 'toy'}", "model.d_model=32", "model.d_ff=64",
            "train.max_steps=2", "train.eval_bleu=false", "train.metric=loss"]
    train(ROOT / "configs" / "toy.yaml", sets, run, "cpu", False)
    end = [json.loads(line) for line in (run / "metrics.jsonl").open()][-1]
    assert end["event"] == "end" and end["reason"] == StopReason.MAX_STEPS.value == "max_steps"


@pytest.mark.slow  # a real (tiny) training run
def test_a_run_stops_at_its_patience(tmp_path, capsys):
    """A learning rate too small to move the validation loss's 4 decimals: the first
    validation is the best, and the run stops after train.patience more, long before its
    step limit."""
    run = tmp_path / "run"
    sets = [*TINY, f"data.dir={ROOT / 'data' / 'toy'}", "model.d_model=32", "model.d_ff=64",
            "train.max_steps=1000", "train.max_epochs=100", "train.eval_every=3",
            "train.eval_epochs=false", "train.eval_bleu=false", "train.metric=loss",
            "train.lr=1e-12", "train.warmup=0", "train.patience=2"]
    train(ROOT / "configs" / "toy.yaml", sets, run, "cpu", False)
    records = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    valid = [r for r in records if r["event"] == "valid"]
    assert [r["step"] for r in valid] == [3, 6, 9]
    assert len({r["val_loss"] for r in valid}) == 1  # the loss did not move
    assert records[-1] == {**records[-1], "event": "end", "step": 9, "reason": "patience"}
    assert "done at step 9 (patience)" in capsys.readouterr().err
    assert load_checkpoint(run / "best.pt")["step"] == 3
    assert load_checkpoint(run / "last.pt")["step"] == 9
    before = snapshot(run)
    assert train(None, [], run, "cpu", True)["step"] == 9
    assert "nothing to do" in capsys.readouterr().err and snapshot(run) == before


def test_agreed_flags_decide_signal_before_time(tmp_path):
    s = stopping(tmp_path)
    s.agree(0.0, 0.0)
    assert s.reason is None and not s.interrupted()
    s.agree(0.0, 1.0)
    assert s.reason is StopReason.MAX_MINUTES and s.interrupted()
    s.agree(1.0, 1.0)
    assert s.reason is StopReason.SIGNAL and s.interrupted()


def test_host_flags_count_the_time_budget_from_the_end_of_warmup(tmp_path):
    assert stopping(tmp_path).host_flags(Progress()) == (0.0, 0.0, 0.0)  # no budget
    s = stopping(tmp_path, max_minutes=1.0, warmup=10)
    s.clock.started = time.time() - 40  # 40 s in this process, after 5 s in an earlier one
    signalled, out_of_time, done = s.host_flags(Progress(step=5, train_s=5.0))
    assert (signalled, out_of_time, done) == (0.0, 0.0, 0.0)  # warmup: no time share yet
    signalled, out_of_time, done = s.host_flags(Progress(step=10, train_s=5.0, warmup_s=15.0))
    assert out_of_time == 0.0 and done == pytest.approx((45 - 15) / (60 - 15), abs=1e-3)
    _, out_of_time, done = s.host_flags(Progress(step=10, train_s=30.0, warmup_s=15.0))
    assert out_of_time == 1.0 and done > 1


def test_steps_done_only_at_a_step_limit(tmp_path):
    assert not stopping(tmp_path).steps_done(10**6)  # max_steps 0: no limit
    s = stopping(tmp_path, max_steps=5)
    assert not s.steps_done(4) and s.reason is None
    assert s.steps_done(5) and s.reason is StopReason.MAX_STEPS


@pytest.mark.parametrize("metric, values", [("bleu", [10.0, 12.0, 11.0, 12.0]),
                                            ("loss", [3.0, 2.0, 2.5, 2.0])])
def test_patience_counts_validations_since_the_best(tmp_path, metric, values):
    s, p = stopping(tmp_path, metric=metric, patience=2), Progress()
    key = "val_bleu" if metric == "bleu" else "val_loss"
    better = [s.improved(p, {key: v}) for v in values]
    assert better == [True, True, False, False]  # a tie is no improvement
    assert (p.best, p.bad_evals) == (values[1], 2)
    assert s.patience_spent(p) and s.reason is StopReason.PATIENCE
    never = stopping(tmp_path, metric=metric, patience=0)
    assert not never.patience_spent(Progress(bad_evals=100)) and never.reason is None


def test_while_bleu_is_stuck_at_zero_the_validation_loss_decides(tmp_path):
    """A new model decodes nothing that matches yet: BLEU 0, 0, 0 says nothing, and a falling
    loss is progress (best.pt moves, patience waits); once BLEU moves, BLEU decides again."""
    s, p = stopping(tmp_path, metric="bleu", patience=2), Progress()
    results = [(0.0, 5.0), (0.0, 4.5), (0.0, 4.0), (0.0, 4.2), (0.0, 3.9), (1.5, 4.1),
               (0.0, 3.0), (1.5, 2.9)]
    better = [s.improved(p, {"val_bleu": b, "val_loss": loss}) for b, loss in results]
    assert better == [True, True, True, False, True, True, False, False]
    assert (p.best, p.best_loss, p.bad_evals) == (1.5, 4.1, 2)
    assert s.patience_spent(p)
    resumed = Progress(best=0.0, bad_evals=1)  # last.pt of a run before best_loss: no tie-break
    assert not s.improved(resumed, {"val_bleu": 0.0, "val_loss": 1.0})
    assert resumed.bad_evals == 2


def test_signals_are_caught_only_while_training(tmp_path):
    s, before = stopping(tmp_path), signal.getsignal(signal.SIGTERM)
    with s.catching_signals():
        assert signal.getsignal(signal.SIGTERM) == s.on_signal
        s.on_signal(signal.SIGTERM, None)
        assert s.signalled and s.reason is None  # decided once all ranks agree (the step)
        with pytest.raises(RunError, match="interrupted twice"):
            s.on_signal(signal.SIGTERM, None)
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.slow
def test_max_minutes_ends_training_with_a_validation_and_save(toy300, tmp_path):
    """A budget far below max_epochs: training stops on time, validates at its last step and
    keeps best.pt; a resume counts the time already spent, so it stops again at once."""
    run = tmp_path / "run"
    result = train(CONFIG, exact_sets(toy300, "train.max_epochs=10000",
                                      "train.max_minutes=0.05"), run, "cpu", False)
    events = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    end = events[-1]
    assert end["event"] == "end" and end["reason"] == "max_minutes", end
    assert [e for e in events if e["event"] == "valid"][-1]["step"] == result["step"]
    assert (run / "best.pt").is_file()
    trained = load_checkpoint(run / "last.pt")["progress"]["train_s"]
    assert trained >= 3.0, trained
    before = snapshot(run)
    again = train(None, ["train.max_minutes=0.05"], run, "cpu", True)
    assert again["step"] == result["step"]  # the budget is found spent before any update
    assert snapshot(run) == before


def test_a_second_signal_stops_at_once(tmp_path):
    trainer = Trainer(load_config(CONFIG, TINY), tmp_path / "run", "cpu")
    trainer.stopping.on_signal(signal.SIGINT, None)
    # The first only asks the loop to save and stop (once every rank knows).
    assert trainer.stopping.signalled and trainer.stopping.reason is None
    with pytest.raises(RunError, match="interrupted twice: stopped without saving"):
        trainer.stopping.on_signal(signal.SIGINT, None)


@pytest.mark.slow
@pytest.mark.parametrize("limit, key", [("train.max_steps=12", "train.max_steps"),
                                        ("train.max_epochs=1", "train.max_epochs")])
def test_a_finished_run_resumes_to_nothing_to_do(toy300, tmp_path, cli, limit, key):
    """Resumed twice, a finished run trains no step and leaves its checkpoints and metrics as
    they were (it used to train one more step each time); a raised limit trains on."""
    run = tmp_path / "run"
    sets = [arg for s in exact_sets(toy300, limit) for arg in ("--set", s)]
    r = cli("train", CONFIG, "--out", run, "--device", "cpu", *sets)
    assert r.code == 0, r.err
    step = json.loads(r.out.splitlines()[-1])["step"]
    before = snapshot(run)
    for _ in range(2):
        r = cli("train", "--out", run, "--resume", "--device", "cpu")
        assert r.code == 0, r.err
        assert json.loads(r.out.splitlines()[-1])["step"] == step
        assert (f"nothing to do: {run} finished at step {step} ({key} " in r.err
                and f"raise {key} (--set {key}=N) to train on" in r.err), r.err
        assert snapshot(run) == before
    more = {"train.max_steps": "train.max_steps=14", "train.max_epochs": "train.max_epochs=2"}
    r = cli("train", "--out", run, "--resume", "--device", "cpu", "--set", more[key])
    assert r.code == 0 and json.loads(r.out.splitlines()[-1])["step"] > step, r.err
