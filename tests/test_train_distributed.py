"""mt/train/distributed.py: which batches each rank trains; and several training processes
over gloo, as torchrun starts them (tests/ddp_worker.py): N ranks equal one rank accumulating N
batches, a signal to one rank stops all at the same step, and a run resumed on other numbers of
ranks trains each batch once."""

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONFIG, ROOT, THREADS, exact_sets, exact_trainer
from mt.checkpoint import load_checkpoint
from mt.commands.train import train
from mt.train.distributed import update_positions


def test_update_positions_cover_an_epoch_once_on_any_number_of_ranks():
    for world, accum, n in [(1, 1, 7), (2, 1, 7), (2, 3, 7), (3, 2, 20), (4, 1, 3)]:
        seen, start = [], 0
        while start < n:
            parts = [update_positions(start, n, world, accum, r) for r in range(world)]
            assert all(len(p) <= accum for p in parts)
            seen += [i for p in parts for i in p]
            start = min(start + world * accum, n)
        assert sorted(seen) == list(range(n)), (world, accum, n)


WORKER = Path(__file__).with_name("ddp_worker.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(world: int, run: Path, data: Path, *more: str, resume: bool = False,
           trace: Path | None = None, signal_at: int | None = None, signal_rank: int = 1):
    """Run `world` training processes over gloo, as torchrun would; returns (code, out, err)
    of each rank."""
    spec = {"config": str(CONFIG), "sets": exact_sets(data, *more), "run": str(run),
            "resume": resume, "trace": str(trace or run.parent / "trace"), "signal_at": signal_at,
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
def test_two_ranks_equal_one_rank_accumulating_their_two_batches(toy300, tmp_path):
    two = launch(2, tmp_path / "two", toy300, "train.max_steps=4")
    assert all(code == 0 for code, _, _ in two), two
    train(CONFIG, exact_sets(toy300, "train.max_steps=4", "train.accum_steps=2"),
          tmp_path / "one", "cpu", False)
    a = load_checkpoint(tmp_path / "two" / "last.pt")
    b = load_checkpoint(tmp_path / "one" / "last.pt")
    assert a["progress"]["position"] == b["progress"]["position"] == 8
    assert (a["progress"]["world"], b["progress"]["world"]) == (2, 1)
    for name, tensor in a["model"].items():
        assert (tensor - b["model"][name]).abs().max() <= 1e-6, name
    # Not trivially equal: one rank without accumulation (other batches per step) differs.
    train(CONFIG, exact_sets(toy300, "train.max_steps=4"), tmp_path / "other", "cpu", False)
    c = load_checkpoint(tmp_path / "other" / "last.pt")
    assert max((t - c["model"][n]).abs().max() for n, t in a["model"].items()) > 1e-3
    logged = [json.loads(line) for line in (tmp_path / "two" / "metrics.jsonl").open()]
    assert [e["step"] for e in logged if e["event"] == "train"] == [1, 2, 3, 4]
    assert all(e["nll"] < e["loss"] for e in logged if e["event"] == "train")


@pytest.mark.dist
def test_signal_to_one_rank_stops_both_at_the_same_step_and_saves(toy300, tmp_path):
    run = tmp_path / "run"
    ranks = launch(2, run, toy300, "train.max_epochs=1000", signal_at=3, signal_rank=1)
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
def test_run_resumed_on_other_numbers_of_ranks_trains_each_batch_once(toy300, tmp_path):
    run, trace = tmp_path / "run", tmp_path / "trace"
    n = len(exact_trainer(toy300, tmp_path / "count").train_data.batches(400, seed=1))
    # (ranks, train up to step): 2 ranks take batches 0-5; then 1 rank takes one or two, so
    # that an odd number is left, and the epoch's last update on 2 ranks leaves one idle; then
    # 2 ranks finish the epoch and train 4 batches of the next.
    one = 1 if (n - 6) % 2 == 0 else 2
    left = n - 6 - one
    stages = [(2, 3), (1, 3 + one), (2, 3 + one + (left + 1) // 2 + 2)]
    for i, (world, steps) in enumerate(stages):
        results = launch(world, run, toy300, f"train.max_steps={steps}", resume=i > 0,
                         trace=trace)
        assert all(code == 0 for code, _, _ in results), results
        assert load_checkpoint(run / "last.pt")["step"] == steps
    seen = read_trace(trace)
    first = sorted(i for epoch, i in seen if epoch == 0)
    assert first == list(range(n))  # every batch once: none skipped, none repeated
    assert sorted(i for epoch, i in seen if epoch == 1) == [0, 1, 2, 3]
    p = load_checkpoint(run / "last.pt")["progress"]
    assert (p["epoch"], p["position"], p["world"]) == (1, 4, 2)
