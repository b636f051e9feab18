"""mt/train/loop.py: the Trainer. Accumulation, distributed runs (gloo, several processes), CPU
bf16, step checkpoints, time budgets; its run directory (locked, refused, left untouched), exact
resume, non-finite losses, signals. Equivalence tests: k micro-batches equal one batch of their
union, N ranks equal one rank accumulating N batches, a run split across numbers of ranks trains
each batch once.
"""

import fcntl
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import (
    CONFIG,
    ROOT,
    THREADS,
    TINY,
    TOY,
    Result,
    assert_user_error,
    corpus,
    run_mt,
    small_config,
    snapshot,
    straight_and_resumed,
)
from mt.checkpoint import load_checkpoint
from mt.commands.train import train
from mt.config import load_config
from mt.data import Batch, pad
from mt.device import autocast_dtype, cpu_has_native_bf16
from mt.errors import RunError
from mt.train.loop import Trainer
from mt.train.state import resume_changes
from mt.train.step import MAX_BAD_STEPS
from mt.vocab import PAD

WORKER = Path(__file__).with_name("ddp_worker.py")
# Small and fast; dropout off, so that ranks (which share the seed) and micro-batches draw the
# same (no) random masks; fp32, so that sums split differently agree to rounding.
SMALL = [*TINY, "model.d_model=32", "model.d_ff=64", "train.max_tokens=400", "train.amp=none",
         "train.eval_bleu=false", "train.metric=loss", "train.eval_every=1000",
         "train.log_every=1", "train.warmup=10"]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """300 training pairs of the toy corpus (about 25 batches of 400 tokens)."""
    d = tmp_path_factory.mktemp("corpus")
    for split, count in (("train", 300), ("val", 30)):
        for lang in ("en", "de"):
            lines = (TOY / f"toy.{split}.{lang}").read_text().splitlines()[:count]
            (d / f"toy.{split}.{lang}").write_text("\n".join(lines) + "\n")
    return d


def sets(data: Path, *more: str) -> list[str]:
    return [*SMALL, f"data.dir={data}", *more]


def trainer(data: Path, run: Path, *more: str) -> Trainer:
    t = Trainer(load_config(CONFIG, sets(data, *more)), run, "cpu")
    t.prepare_run_dir()
    t.load_data()
    t.build()
    return t


def merge(batches: list[Batch]) -> Batch:
    """One batch holding the sentences of several (padded to the longest)."""
    rows = lambda name: [r[r != PAD].tolist() for b in batches for r in getattr(b, name)]  # noqa: E731
    return Batch(pad(rows("src")), pad(rows("tgt_in")), pad(rows("tgt_out")),
                 sum(b.n_tgt_tokens for b in batches))


def test_k_micro_batches_equal_one_batch_of_their_union(data, tmp_path):
    accumulated = trainer(data, tmp_path / "a", "train.accum_steps=3")
    whole = trainer(data, tmp_path / "b")
    three = accumulated.train_data.batches(400, seed=1)[:3]
    assert len({b.src.size(1) for b in three}) > 1  # the union needs more padding than each
    loss_k = accumulated.step(*three)
    loss_1 = whole.step(merge(three))
    assert torch.allclose(loss_k, loss_1, rtol=1e-6), (loss_k, loss_1)
    for (name, a), b in zip(accumulated.model.named_parameters(), whole.model.parameters()):
        # Gradients, not weights: Adam's first step is lr * sign(grad), so a gradient that is
        # zero up to rounding (the key bias's) moves a weight by +-lr either way.
        assert a.grad is not None and torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-7), name
    assert accumulated.progress.step == whole.progress.step == 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(world: int, run: Path, data: Path, *more: str, resume: bool = False,
           trace: Path | None = None, signal_at: int | None = None, signal_rank: int = 1):
    """Run `world` training processes over gloo, as torchrun would; returns (code, out, err)
    of each rank."""
    spec = {"config": str(CONFIG), "sets": sets(data, *more), "run": str(run), "resume": resume,
            "trace": str(trace or run.parent / "trace"), "signal_at": signal_at,
            "signal_rank": signal_rank}
    env = {**os.environ, **THREADS, "PYTHONUNBUFFERED": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(world)}
    procs = [subprocess.Popen([sys.executable, str(WORKER), json.dumps(spec)], cwd=ROOT,
                              env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for r in range(world)]
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a rank hung")
        results.append((p.returncode, out, err))
    return results


@pytest.mark.dist
def test_two_ranks_equal_one_rank_accumulating_their_two_batches(data, tmp_path):
    two = launch(2, tmp_path / "two", data, "train.max_steps=4")
    assert all(code == 0 for code, _, _ in two), two
    train(CONFIG, sets(data, "train.max_steps=4", "train.accum_steps=2"), tmp_path / "one",
          "cpu", False)
    a = load_checkpoint(tmp_path / "two" / "last.pt")
    b = load_checkpoint(tmp_path / "one" / "last.pt")
    assert a["progress"]["position"] == b["progress"]["position"] == 8
    assert (a["progress"]["world"], b["progress"]["world"]) == (2, 1)
    for name, tensor in a["model"].items():
        assert (tensor - b["model"][name]).abs().max() <= 1e-6, name
    # Not trivially equal: one rank without accumulation (other batches per step) differs.
    train(CONFIG, sets(data, "train.max_steps=4"), tmp_path / "other", "cpu", False)
    c = load_checkpoint(tmp_path / "other" / "last.pt")
    assert max((t - c["model"][n]).abs().max() for n, t in a["model"].items()) > 1e-3
    logged = [json.loads(line) for line in (tmp_path / "two" / "metrics.jsonl").open()]
    assert [e["step"] for e in logged if e["event"] == "train"] == [1, 2, 3, 4]
    assert all(e["nll"] < e["loss"] for e in logged if e["event"] == "train")


@pytest.mark.dist
def test_signal_to_one_rank_stops_both_at_the_same_step_and_saves(data, tmp_path):
    run = tmp_path / "run"
    ranks = launch(2, run, data, "train.max_epochs=1000", signal_at=3, signal_rank=1)
    steps = []
    for code, _, err in ranks:
        assert code == 6, err  # RunError: interrupted, saved
        steps.append(int(re.search(r"interrupted at step (\d+)", err).group(1)))
    assert steps[0] == steps[1] >= 3
    state = load_checkpoint(run / "last.pt")
    assert state["step"] == state["progress"]["step"] == steps[0]
    assert state["progress"]["position"] == 2 * steps[0]


def read_trace(trace: Path) -> list[tuple[int, int]]:
    seen = []
    for path in trace.parent.glob(trace.name + ".*"):
        for line in path.read_text().splitlines():
            epoch, positions = json.loads(line)
            seen += [(epoch, i) for i in positions]
    return seen


@pytest.mark.dist
def test_run_resumed_on_other_numbers_of_ranks_trains_each_batch_once(data, tmp_path):
    run, trace = tmp_path / "run", tmp_path / "trace"
    n = len(trainer(data, tmp_path / "count").train_data.batches(400, seed=1))
    # (ranks, train up to step): 2 ranks take batches 0-5; then 1 rank takes one or two, so
    # that an odd number is left, and the epoch's last update on 2 ranks leaves one idle; then
    # 2 ranks finish the epoch and train 4 batches of the next.
    one = 1 if (n - 6) % 2 == 0 else 2
    left = n - 6 - one
    stages = [(2, 3), (1, 3 + one), (2, 3 + one + (left + 1) // 2 + 2)]
    for i, (world, steps) in enumerate(stages):
        results = launch(world, run, data, f"train.max_steps={steps}", resume=i > 0,
                         trace=trace)
        assert all(code == 0 for code, _, _ in results), results
        assert load_checkpoint(run / "last.pt")["step"] == steps
    seen = read_trace(trace)
    first = sorted(i for epoch, i in seen if epoch == 0)
    assert first == list(range(n))  # every batch once: none skipped, none repeated
    assert sorted(i for epoch, i in seen if epoch == 1) == [0, 1, 2, 3]
    p = load_checkpoint(run / "last.pt")["progress"]
    assert (p["epoch"], p["position"], p["world"]) == (1, 4, 2)


def test_cpu_bf16_autocast_trains(data, tmp_path):
    assert autocast_dtype("bf16", torch.device("cpu")) == torch.bfloat16
    assert autocast_dtype("none", torch.device("cpu")) is None
    assert autocast_dtype("fp16", torch.device("cpu")) is None  # fp16 is for CUDA
    auto = torch.bfloat16 if cpu_has_native_bf16() else None  # never emulated bf16
    assert autocast_dtype("auto", torch.device("cpu")) == auto
    assert isinstance(cpu_has_native_bf16(), bool)
    t = trainer(data, tmp_path / "run", "train.amp=bf16")
    batch = t.train_data.batches(400, seed=1)[0]
    seen = []
    linear = next(m for m in t.model.decoder.modules() if isinstance(m, torch.nn.Linear))
    hook = linear.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    losses = [float(t.step(batch)) for _ in range(20)]
    hook.remove()
    assert seen[0] == torch.bfloat16  # the matrix products ran in bf16
    assert all(p.dtype == torch.float32 for p in t.model.parameters())  # weights stay fp32
    assert losses[-1] < losses[0] * 0.7, losses


@pytest.mark.slow
def test_keep_checkpoints_then_mt_average_feeds_eval(data, tmp_path):
    run = tmp_path / "run"
    train(CONFIG, sets(data, "train.max_steps=8", "train.eval_every=2",
                       "train.keep_checkpoints=3"), run, "cpu", False)
    assert sorted(p.name for p in run.glob("ckpt.*.pt")) == ["ckpt.4.pt", "ckpt.6.pt",
                                                             "ckpt.8.pt"]
    r = run_mt("average", str(run), "--last", "2")
    assert r.code == 0, r.err
    assert r.out.strip() == str(run / "average.pt")
    mean = load_checkpoint(run / "average.pt")["model"]
    a, b = (load_checkpoint(run / f"ckpt.{s}.pt")["model"] for s in (6, 8))
    assert all(torch.allclose(mean[k], (a[k] + b[k]) / 2) for k in mean)
    r = run_mt("eval", str(run / "average.pt"), "--split", "val", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["step"] == 8
    # One file: moved away from its run directory, it still translates.
    (run / "average.pt").rename(tmp_path / "alone.pt")
    r = run_mt("translate", str(tmp_path / "alone.pt"), input="eight cats\n")
    assert r.code == 0 and r.out.count("\n") == 1, r.err


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
def test_max_minutes_ends_training_with_a_validation_and_save(data, tmp_path):
    """A budget far below max_epochs: training stops on time, validates at its last step and
    keeps best.pt; a resume counts the time already spent, so it stops again at once."""
    run = tmp_path / "run"
    result = train(CONFIG, sets(data, "train.max_epochs=10000", "train.max_minutes=0.05"),
                   run, "cpu", False)
    events = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    end = events[-1]
    assert end["event"] == "end" and end["reason"] == "max_minutes", end
    assert [e for e in events if e["event"] == "valid"][-1]["step"] == result["step"]
    assert (run / "best.pt").is_file()
    trained = load_checkpoint(run / "last.pt")["progress"]["train_s"]
    assert trained >= 3.0, trained
    again = train(None, ["train.max_minutes=0.05"], run, "cpu", True)
    assert again["step"] == result["step"] + 1  # one update, then the budget is found spent


@pytest.mark.slow
def test_decay_to_a_time_budget_reaches_zero_when_it_is_spent(data, tmp_path):
    """schedule: linear with max_minutes and no step limit: the learning rate falls with the
    time spent, step after step, and is all but zero at the budget's end."""
    run = tmp_path / "run"
    train(CONFIG, sets(data, "train.max_epochs=10000", "train.max_minutes=0.05",
                       "train.schedule=linear", "train.warmup=2", "train.lr=1e-3",
                       "train.log_every=1"), run, "cpu", False)
    events = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    lrs = [e["lr"] for e in events if e["event"] == "train" and e["step"] >= 2]
    assert len(lrs) >= 5, lrs
    assert all(a >= b for a, b in zip(lrs, lrs[1:])) and lrs[0] > lrs[-1], lrs
    assert lrs[-1] < 0.1e-3, lrs
    assert load_checkpoint(run / "last.pt")["progress"]["warmup_s"] > 0


@pytest.mark.slow
def test_eval_epochs_false_validates_only_every_eval_every_steps(data, tmp_path):
    """Epochs of this corpus end between multiples of eval_every: with eval_epochs they add
    validations, without they add none (only the final one at the last step)."""
    steps = {}
    for flag in ("true", "false"):
        run = tmp_path / flag
        train(CONFIG, sets(data, "train.max_steps=60", "train.eval_every=25",
                           f"train.eval_epochs={flag}"), run, "cpu", False)
        lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        steps[flag] = [x["step"] for x in lines if x["event"] == "valid"]
    assert steps["false"] == [25, 50, 60]
    assert set(steps["true"]) > set(steps["false"])  # epoch ends (every ~25 steps) too


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
    assert set(c) == {"format", "model", "step", "config", "vocab", "files",
                      "lineage"}  # no training state


def test_resume_needs_the_training_state(cli, run_copy):
    shutil.copy(run_copy / "best.pt", run_copy / "last.pt")  # weights only
    r = cli("train", "--out", run_copy, "--resume", "--device", "cpu")
    assert_user_error(r, 5, "last.pt", "cannot resume")


@pytest.mark.slow
def test_second_training_into_a_locked_directory_is_refused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with open(run / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running `mt train` holds it
        before = snapshot(run)
        r = run_mt("train", str(CONFIG), "--out", str(run), "--device", "cpu")
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


def saved_run(run: Path) -> Path:
    """A run directory as far as a resume reads it before the data: config and vocabularies
    (last.pt is not opened before then)."""
    run.mkdir()
    load_config(CONFIG, TINY).save(run / "config.yaml")
    for name in ("vocab.src.txt", "vocab.tgt.txt"):
        (run / name).write_text("<pad>\n<unk>\n<bos>\n<eos>\n")
    (run / "last.pt").write_bytes(b"not read before the data")
    return run


def test_resume_refuses_a_changed_model_or_data_setting_however_given(cli, tmp_path):
    run = saved_run(tmp_path / "run")
    before = snapshot(run)
    r = cli("train", "--out", run, "--resume", "--set", "data.dir=elsewhere", "--device", "cpu")
    assert_user_error(r, 3, "--set data.dir=elsewhere: data.dir differs from the run being "
                      "resumed ('elsewhere', was 'data/toy'",
                      f"start a new run from this one's weights with it: --init-from {run} "
                      "--out NEW")
    changed = tmp_path / "changed.yaml"
    load_config(run / "config.yaml", ["data.train=other"]).save(changed)
    r = cli("train", changed, "--out", run, "--resume", "--device", "cpu")
    assert_user_error(r, 3, f"{changed}: data.train differs", "--init-from")
    changed = tmp_path / "changed.yaml"
    load_config(run / "config.yaml", ["model.d_model=32"]).save(changed)
    r = cli("train", changed, "--out", run, "--resume", "--device", "cpu")
    assert_user_error(r, 3, f"{changed}: model.d_model differs", "another --out")
    r = cli("train", "--out", run, "--resume", "--set", "train.lr=1e-3", "--device", "cpu")
    assert_user_error(r, 3, "--set train.lr=1e-3: train.lr differs")
    assert snapshot(run) == before and not (tmp_path / "elsewhere").exists()


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


def test_a_refused_start_takes_back_what_it_made_and_nothing_else(cli, tmp_path):
    """SentencePiece's size check comes with the token cache, after the run directory is
    made and locked: a new directory (parents included) goes; one that was there stays as it
    was; --resume into nowhere leaves nothing either."""
    too_big = ["--set", "data.tokenizer=sentencepiece", "--set", "data.vocab_size=100000"]
    new = tmp_path / "runs" / "new"
    r = cli("train", CONFIG, "--out", new, "--device", "cpu", *too_big)
    assert_user_error(r, 3, "data.vocab_size 100000 is too large")
    assert list(tmp_path.iterdir()) == []
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.yaml").write_text("data: {}\n")  # the user's own: not the run's to remove
    before = snapshot(mine)
    r = cli("train", mine / "config.yaml", "--out", mine, "--device", "cpu", *too_big)
    assert_user_error(r, 3, "data.vocab_size 100000 is too large")
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
def test_signal_saves_last_checkpoint_and_resume_continues(tmp_path, sig):
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
    r = run_mt("train", "--out", str(run), "--resume", "--device", "cpu",
               "--set", f"train.max_steps={step + 2}")
    assert r.code == 0, r.err
    assert f"at step {step}" in r.err
    assert json.loads(r.out.splitlines()[-1])["step"] == step + 2


def test_a_second_signal_stops_at_once(tmp_path):
    trainer = Trainer(load_config(CONFIG, TINY), tmp_path / "run", "cpu")
    trainer.stopping.on_signal(signal.SIGINT, None)
    # The first only asks the loop to save and stop (once every rank knows).
    assert trainer.stopping.signalled and trainer.stopping.reason is None
    with pytest.raises(RunError, match="interrupted twice: stopped without saving"):
        trainer.stopping.on_signal(signal.SIGINT, None)
