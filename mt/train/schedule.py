"""The learning rate at each step: linear warmup, then a decay."""

from __future__ import annotations

import math


def lr_at(step: int, peak: float, warmup: int, schedule: str = "inverse_sqrt",
          total: int = 0, time_done: float = 0.0) -> float:
    """Linear warmup to `peak`, then decay: with the inverse square root of the step, or along
    a cosine or a line that reaches zero at step `total` or when the time budget is spent,
    whichever comes first (`time_done`: the share of the budget after warmup already used)."""
    step = max(step, 1)
    if step < warmup:
        return peak * step / warmup
    if schedule == "inverse_sqrt":
        return peak * math.sqrt(warmup / step) if warmup else peak
    done = (step - warmup) / max(total - warmup, 1) if total else 0.0  # share of the decay
    done = min(max(done, time_done), 1.0)
    if schedule == "cosine":
        return peak * 0.5 * (1.0 + math.cos(math.pi * done))
    return peak * (1.0 - done)
