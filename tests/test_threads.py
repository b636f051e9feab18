"""mt/threads.py: how many threads each process takes."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from mt.threads import (
    MAX_STREAMS,
    Governor,
    Streams,
    available_cores,
    follow_load,
    threads_for,
    translation_streams,
)


def test_threads_for_shares_the_cores_out():
    cores = available_cores()
    assert threads_for(3) == 3
    assert threads_for(0) == cores and threads_for(0, 2) == max(1, cores // 2)
    assert threads_for(0, 10 * cores) == 1


def test_governor_gives_torch_the_cores_others_leave(monkeypatch):
    """Two cores: a neighbour busy on one of them over a 1 s interval takes a thread away; when it
    stops, the thread comes back; explicit threads are fixed and no governor runs."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    samples = iter([
        (0.0, 0.0, 0, 0),
        (1.0, 1.3, 200, 0),  # both cores busy, 1.3 of them ours: a neighbour on 0.7
        (2.0, 2.3, 400, 0),  # one thread of ours, the neighbour on the other core
        (3.0, 4.3, 600, 0),  # the neighbour gone: 2 cores, all ours
    ])
    monkeypatch.setattr(Governor, "_sample", lambda self: next(samples))
    clock = iter([1.0, 2.0, 3.0])
    monkeypatch.setattr("mt.threads.time.monotonic", lambda: next(clock))
    g = Governor(cap=2)
    try:
        g.tick()
        assert (g.threads, torch.get_num_threads()) == (1, 1)
        g.tick()
        assert g.threads == 1
        g.tick()
        assert (g.threads, torch.get_num_threads(), g.changes) == (2, 2, 2)
    finally:
        torch.set_num_threads(1)
    assert Governor.want(g, 0.4) == 2 and Governor.want(g, 0.6) == 1 and Governor.want(g, 5) == 1


def governed(tick) -> int | None:
    """The cap of the Governor whose tick follow_load returned; None for a tick that does
    nothing."""
    governor = getattr(tick, "__self__", None)
    return governor.cap if isinstance(governor, Governor) else None


def test_follow_load_fixed_or_governed():
    try:
        tick = follow_load(3)
        assert torch.get_num_threads() == 3 and governed(tick) is None
        tick()  # does nothing
        assert torch.get_num_threads() == 3
        assert governed(follow_load(0)) == 3  # the cap is torch's count: 3
        torch.set_num_threads(1)
        assert governed(follow_load(0)) is None  # nothing to lower
        # a cap given (mt serve's worker: its main thread keeps one)
        assert governed(follow_load(0, cap=2)) == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="Linux's /proc/stat")
def test_governor_sees_a_busy_neighbour():
    """A real process busy on one of this process's cores for a second is counted as others'."""
    core = min(os.sched_getaffinity(0))
    other = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                             preexec_fn=lambda: os.sched_setaffinity(0, {core}))
    try:
        g = Governor(cap=1)
        time.sleep(0.3)  # the neighbour started
        before = g._sample()
        time.sleep(1.0)
        assert g.others(before, g._sample()) > 0.8
    finally:
        other.kill()
        other.wait()


def test_streams_map_in_order_in_threads_of_their_own_thread_count():
    seen = []

    def work(i):
        time.sleep(0.01 * (i % 3))  # finishing out of order
        seen.append((threading.get_ident(), torch.get_num_threads()))
        return i * i

    assert list(Streams(3, 2).map(work, range(12))) == [i * i for i in range(12)]
    assert len({ident for ident, _ in seen}) > 1 and {n for _, n in seen} == {2}
    assert threading.get_ident() not in {ident for ident, _ in seen}
    seen.clear()
    ticks = []
    one = Streams(tick=lambda: ticks.append(len(seen)))  # one stream: this thread, ticked
    assert list(one.map(work, range(3))) == [0, 1, 4]
    assert {ident for ident, _ in seen} == {threading.get_ident()} and ticks == [0, 1, 2]


def test_translation_streams_one_per_thread_unless_threads_are_given():
    try:
        for total, count, each in ((1, 1, 1), (2, 2, 1), (4, 4, 1), (16, MAX_STREAMS, 4)):
            torch.set_num_threads(total)  # torch's count: the cores, or OMP_NUM_THREADS
            s = translation_streams(0)
            assert (s.count, s.threads, torch.get_num_threads()) == (count, each, each)
            assert governed(s.tick) is None  # no team here to lower beside the streams
        for args in ((3,), (0, "cuda"), (0, "cpu", "ctranslate2")):
            s = translation_streams(*args)
            assert s.count == 1
        assert torch.get_num_threads() == 3 and governed(s.tick) == 3  # follow_load(0)
    finally:
        torch.set_num_threads(1)
