"""CPU threads for torch: how many each process of mt takes."""

from __future__ import annotations

import os


def available_cores() -> int:
    """The cores this process may run on (its affinity: taskset, cgroups' cpusets)."""
    return len(os.sched_getaffinity(0))


def threads_for(threads: int = 0, workers: int = 1) -> int:
    """threads if given (> 0), else the available cores shared out among `workers` processes."""
    return threads if threads > 0 else max(1, available_cores() // workers)
