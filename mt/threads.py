"""CPU threads for torch: how many each process of mt takes, and how they wait
(docs/training.md#sharing-a-machine)."""

from __future__ import annotations

import os

# OpenMP's threads spin, at the end of each parallel region, for GOMP_SPINCOUNT checks before
# they sleep; libgomp's default, 300,000, is hundreds of microseconds. Beside another busy
# process a spinning thread holds a core that the thread everyone waits for needs, and mt ran
# 3-5x slower. Spinning this long keeps the idle speed; benchmarks/bench_contention.py chose it.
SPINCOUNT = "10000"


def wait_briefly() -> None:
    """Set GOMP_SPINCOUNT to SPINCOUNT where the user has set neither it nor OMP_WAIT_POLICY.
    Only takes effect before torch is first imported (OpenMP reads it when it loads)."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", SPINCOUNT)


def available_cores() -> int:
    """The cores this process may run on (its affinity: taskset, cgroups' cpusets)."""
    return len(os.sched_getaffinity(0))


def threads_for(threads: int = 0, workers: int = 1) -> int:
    """threads if given (> 0), else the available cores shared out among `workers` processes."""
    return threads if threads > 0 else max(1, available_cores() // workers)
