"""The training loop: accumulation, distributed runs (gloo, several processes), CPU bf16,
checkpoint averaging. Equivalence tests: k micro-batches equal one batch of their union, N ranks
equal one rank accumulating N batches, a run split across numbers of ranks trains each batch once.
"""

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import ROOT, THREADS, TINY, run_mt
from mt.checkpoint import load_checkpoint, save_checkpoint
from mt.commands.average import average_run
from mt.commands.train import train
from mt.config import load_config
from mt.data import Batch, pad
from mt.device import autocast_dtype, cpu_has_native_bf16
from mt.errors import CheckpointError
from mt.train.distributed import update_positions
from mt.train.loop import Trainer
from mt.vocab import PAD

CONFIG = ROOT / "configs" / "toy.yaml"
TOY = ROOT / "data" / "toy"
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


def test_update_positions_cover_an_epoch_once_on_any_number_of_ranks():
    for world, accum, n in [(1, 1, 7), (2, 1, 7), (2, 3, 7), (3, 2, 20), (4, 1, 3)]:
        seen, start = [], 0
        while start < n:
            parts = [update_positions(start, n, world, accum, r) for r in range(world)]
            assert all(len(p) <= accum for p in parts)
            seen += [i for p in parts for i in p]
            start = min(start + world * accum, n)
        assert sorted(seen) == list(range(n)), (world, accum, n)


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
    hook = t.model.generator.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    losses = [float(t.step(batch)) for _ in range(20)]
    hook.remove()
    assert seen[0] == torch.bfloat16  # the matrix products ran in bf16
    assert all(p.dtype == torch.float32 for p in t.model.parameters())  # weights stay fp32
    assert losses[-1] < losses[0] * 0.7, losses


def test_average_of_known_checkpoints(tmp_path):
    for step, value in ((10, 100.0), (20, 1.0), (30, 2.0), (40, 6.0)):
        save_checkpoint(tmp_path / f"ckpt.{step}.pt",
                        {"model": {"w": torch.full((2, 3), value), "n": torch.tensor([7])},
                         "step": step})
    out = average_run(tmp_path, 3, tmp_path / "avg.pt")
    state = load_checkpoint(out)
    assert torch.equal(state["model"]["w"], torch.full((2, 3), 3.0))  # (1 + 2 + 6) / 3
    assert torch.equal(state["model"]["n"], torch.tensor([7]))
    assert state["step"] == 40 and state["averaged_steps"] == [20, 30, 40]
    with pytest.raises(CheckpointError, match="4 step checkpoint"):
        average_run(tmp_path, 5)


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
