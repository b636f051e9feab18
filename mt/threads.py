"""CPU threads for torch: how many each process of mt takes, and decoding streams."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

# torch is imported where it is used: cli.py reads KERNEL_CACHES before any command, and
# `mt --help` should not wait for torch.

# The caches of kernels torch's CPU matrix products keep, one entry per op, shape and thread
# count, each with its scratch memory; each library reads its variable when it first runs, so
# the CLI sets them first, and the user's settings win. oneDNN keeps up to 1,024 kernels: beyond
# a GB after a few hundred bf16 training steps (docs/benchmarks.md#memory-and-batch-shapes).
# ideep (torch's layer over oneDNN) keeps 1,024 of its own, which hold oneDNN's kernels past
# that cache's bound: each change of the thread count (mt.threads.Governor) and each new
# validation batch shape added some, +200 MiB in 300 steps (docs/benchmarks.md#a-busy-neighbour).
KERNEL_CACHES = (("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16"), ("LRU_CACHE_CAPACITY", "16"))


def available_cores() -> int:
    """The cores this process may run on (its affinity: taskset, cgroups' cpusets)."""
    return len(os.sched_getaffinity(0))


def threads_for(threads: int = 0, workers: int = 1) -> int:
    """threads if given (> 0), else the available cores shared out among `workers` processes."""
    return threads if threads > 0 else max(1, available_cores() // workers)


FIRST_LOOK = 0.25  # seconds before the first measurement


class Governor:
    """torch's threads follow the cores other processes leave free.

    OpenMP's threads meet at the end of every parallel region, and libgomp's wait first spins
    (about 300,000 checks) before it sleeps. With more runnable threads than cores, one of ours
    is descheduled while the others spin for it, so every region can cost a time slice: beside
    one busy process, translation on 2 cores ran 9x slower. Passive waiting avoids that but
    halves the idle speed of small regions (docs/benchmarks.md#a-busy-neighbour). So the
    spinning stays, and at most every `every` seconds `tick` measures the cores others keep busy
    (the cores' busy time in /proc/stat less this process's CPU time, both over the interval)
    and gives torch the rest, from 1 to `cap`. A thread's count is its own in OpenMP: call tick
    from the thread that runs the work. Off where /proc/stat is not there (not Linux).
    """

    def __init__(self, cap: int, every: float = 1.0):
        self.cap, self.every = cap, every
        self.cores = set(os.sched_getaffinity(0))
        self.threads = cap
        self.changes = 0  # how many times tick changed the count
        self.wait = min(FIRST_LOOK, every)  # a neighbour busy from the start is seen soon
        self._last = self._sample()

    def _sample(self) -> tuple[float, float, int, int] | None:
        """(wall s, this process's CPU s, the cores' total and idle jiffies), or None."""
        try:
            with open("/proc/stat") as f:
                lines = [line.split() for line in f if line.startswith("cpu")]
        except OSError:
            return None
        total = idle = 0
        for name, *values in lines:
            if name != "cpu" and int(name[3:]) in self.cores:
                # user nice system idle iowait irq softirq steal (guests are inside user)
                v = [int(x) for x in values[:8]]
                total, idle = total + sum(v), idle + v[3] + v[4]
        t = os.times()
        return time.monotonic(), t.user + t.system, total, idle

    def others(self, before: tuple, after: tuple) -> float:
        """Cores' worth of time other processes were busy on this process's cores."""
        wall, cpu = after[0] - before[0], after[1] - before[1]
        total, idle = after[2] - before[2], after[3] - before[3]
        if wall <= 0 or total <= 0:
            return 0.0
        busy = len(self.cores) * (total - idle) / total
        return max(0.0, busy - cpu / wall)

    def want(self, others: float) -> int:
        """Threads for the cores left: a neighbour that keeps half a core busy or more takes
        a thread's core."""
        return max(1, min(self.cap, math.floor(len(self.cores) - others + 0.5)))

    def tick(self) -> None:
        if self._last is None or time.monotonic() - self._last[0] < self.wait:
            return
        self.wait = self.every
        now = self._sample()
        threads = self.want(self.others(self._last, now)) if now else self.threads
        self._last = now
        if threads != self.threads:
            self.threads, self.changes = threads, self.changes + 1
        import torch

        if torch.get_num_threads() != self.threads:  # also a new thread's first tick
            torch.set_num_threads(self.threads)


def follow_load(threads: int = 0, cap: int | None = None) -> Callable[[], None]:
    """threads > 0: exactly that many torch threads. 0: a cap (default torch's count: the
    cores, or OMP_NUM_THREADS) and a Governor that lowers it while other processes keep cores
    busy. Call it from the thread that runs the model, and the tick it returns (the Governor's,
    or one that does nothing) from there before each piece of work. For a process's command
    (mt.commands), not for library code."""
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
        return _no_tick
    cap = cap or torch.get_num_threads()
    torch.set_num_threads(cap)
    return Governor(cap).tick if cap > 1 else _no_tick


def _no_tick() -> None:
    pass


# A cap, not a measurement (streams were measured on 2 cores only): each stream's Python holds
# the GIL while it runs, so many streams would queue for it.
MAX_STREAMS = 4


class Streams:
    """Batches decoded `count` at a time, each in its own thread of `threads` torch threads.

    One thread per core, rather than one team of OpenMP threads over all of them, needs no
    thread to wait for another: a busy neighbour slows down the stream that shares its core
    and no other, where a team's every parallel region waits for its slowest thread. count 1
    (the default): in the calling thread, with its threads, calling `tick` (follow_load's)
    before each item.
    """

    def __init__(self, count: int = 1, threads: int = 1, tick: Callable[[], None] = _no_tick):
        self.count, self.threads, self.tick = count, threads, tick
        self._pool: ThreadPoolExecutor | None = None

    def map(self, fn: Callable, items: Iterable) -> Iterator:
        """fn over items, results in order; concurrently in the streams' threads if count > 1."""
        if self.count <= 1:
            return (self._ticked(fn, item) for item in items)
        if self._pool is None:  # its threads wait for work until the process exits
            import torch

            self._pool = ThreadPoolExecutor(self.count, "mt-stream", torch.set_num_threads,
                                            (self.threads,))
        return self._pool.map(fn, items)

    def _ticked(self, fn: Callable, item):
        self.tick()  # threads follow the free cores, where the command asked for it
        return fn(item)


def translation_streams(threads: int = 0, device: str = "cpu", engine: str = "mt") -> Streams:
    """The threads of a command that translates (mt translate, mt eval), set for this thread
    and returned for its Translator. threads > 0, a GPU, or CTranslate2 (threads of its own):
    `follow_load(threads)`, one stream. 0 on CPU: of torch's count (the cores, or
    OMP_NUM_THREADS), one stream per thread (at most MAX_STREAMS, the threads shared out among
    them); this thread, which loads the model and reads the input, takes as many as each."""
    if threads > 0 or not str(device).startswith("cpu") or engine != "mt":
        return Streams(tick=follow_load(threads))
    import torch

    total = torch.get_num_threads()
    count = min(total, MAX_STREAMS)
    follow_load(total // count)
    return Streams(count, total // count)
