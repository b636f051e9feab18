"""What the training loop reports: its metrics.jsonl records (through MetricsSink), and the
loss statistics of the current log interval."""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch

from mt.train.distributed import Group
from mt.train.metrics_log import MetricsSink
from mt.train.state import Clock, Progress


class TrainingLog:
    """Records are written by rank 0. The interval's statistics stay on the device, where
    every rank adds to them, and are summed over ranks when read: one sync a log interval,
    not one a step."""

    def __init__(self, run_dir: Path, tensorboard: bool, clock: Clock, group: Group):
        self.run_dir, self.tensorboard, self.clock, self.group = run_dir, tensorboard, clock, group
        self.sink: MetricsSink | None = None  # opened by the first record: after the run
        #                                       directory's checks
        self.stats = torch.zeros(3, device=group.device)  # label-smoothed loss, NLL, tokens
        self.interval_start = time.perf_counter()
        self.bar_loss = "loss -"  # the latest interval's losses, for the progress bar

    def write(self, record: dict, **tail) -> None:
        """The record, this process's elapsed seconds, then `tail`."""
        if not self.group.main:
            return
        if self.sink is None:
            self.sink = MetricsSink(self.run_dir, self.tensorboard)
        self.sink.write({**record, "elapsed_s": round(self.clock.elapsed(), 1), **tail})

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()

    def add(self, stats: torch.Tensor) -> None:
        """An update's statistics (StepResult.stats), on the device: no sync."""
        self.stats += stats

    def restart(self) -> None:
        """A new interval starts now."""
        self.interval_start = time.perf_counter()

    def pause(self, seconds: float) -> None:
        """Leave out time spent on other things (validation): tok/s counts training only."""
        self.interval_start += seconds

    def interval(self, progress: Progress, lr: float, grad_norm: torch.Tensor) -> None:
        """Read the interval's statistics (one sync), write them, start a new interval."""
        self.group.sum(self.stats)
        loss, nll, tokens = self.stats.tolist()
        self.stats.zero_()
        now = time.perf_counter()
        rate = tokens / max(now - self.interval_start, 1e-9)
        self.interval_start = now
        loss, nll = ((round(x / tokens, 4) if tokens and math.isfinite(x) else None)
                     for x in (loss, nll))
        self.bar_loss = f"loss {loss} | nll {nll}"
        norm = float(grad_norm)  # the latest step's, before clipping
        self.write({"event": "train", "step": progress.step, "epoch": progress.epoch,
                    "loss": loss, "nll": nll, "lr": lr, "tok_per_s": round(rate)},
                   grad_norm=round(norm, 4) if math.isfinite(norm) else None)
