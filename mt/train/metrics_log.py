"""The metrics log: one JSON object a line in RUN/metrics.jsonl and, optionally, TensorBoard
scalars in RUN/tb. `TrainingLog` is the loop's side (its records, and the loss statistics of
the current log interval); every record passes through `MetricsSink.write`; `read_metrics`
reads them back (for `mt plot` and `mt info`)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from mt.errors import ConfigError, DataError

if TYPE_CHECKING:  # types only: `mt plot` and `mt info` read the log without the loop's modules
    from mt.train.distributed import Group
    from mt.train.state import Clock, Progress

METRICS, TENSORBOARD_DIR = "metrics.jsonl", "tb"
NOT_SCALARS = ("step", "epoch", "elapsed_s", "in_a_row", "skipped_steps")  # bookkeeping


def require_tensorboard() -> None:
    """Fail before training starts if `train.tensorboard: true` cannot be honoured."""
    try:
        import tensorboard  # noqa: F401
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        raise ConfigError("train.tensorboard: true needs TensorBoard: pip install "
                          "'mt[tensorboard]', or set train.tensorboard: false") from None


def scalar_name(event: str, key: str) -> str:
    """TensorBoard tag of a record's field: train/loss, valid/bleu (the val_ prefix dropped)."""
    return f"{event}/{key.removeprefix('val_')}"


class MetricsSink:
    """Appends records to RUN/metrics.jsonl; with tensorboard, also writes each numeric field
    of a record with a step as a scalar `event/field` (e.g. train/grad_norm, valid/bleu)."""

    def __init__(self, run_dir: Path, tensorboard: bool = False):
        self.path = Path(run_dir) / METRICS
        self.writer = None
        if tensorboard:
            require_tensorboard()
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(Path(run_dir) / TENSORBOARD_DIR))

    def write(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        event = record.get("event", "log")
        # "end" repeats the last validation: TensorBoard has it already
        if self.writer is None or not isinstance(record.get("step"), int) or event == "end":
            return
        for key, value in record.items():
            if key in NOT_SCALARS or isinstance(value, bool):
                continue
            if isinstance(value, (int, float)) and math.isfinite(value):
                self.writer.add_scalar(scalar_name(event, key), value, record["step"])
        self.writer.flush()  # a few records a minute: flushing each keeps TensorBoard current

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def read_metrics(run: Path) -> list[dict]:
    """The records of RUN/metrics.jsonl (or of the file given); a line cut short by a
    training run still writing it is skipped."""
    run = Path(run)
    path = run / METRICS if run.is_dir() else run
    if not run.exists():
        raise DataError(f"{run}: no such run directory")
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int):
            records.append(record)
    return records



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
        self.interval_from = 1  # the first step of the current interval

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

    def restart(self, step: int = 0) -> None:
        """A new interval starts now, after `step`."""
        self.interval_start = time.perf_counter()
        self.interval_from = step + 1

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
        # The bar moves every step but these are read once an interval (one sync): say which
        # steps they are the mean of, lest an old loss pass for the latest
        self.bar_loss = f"loss {loss} | nll {nll} (steps {self.interval_from}-{progress.step})"
        self.interval_from = progress.step + 1
        norm = float(grad_norm)  # the latest step's, before clipping
        self.write({"event": "train", "step": progress.step, "epoch": progress.epoch,
                    "loss": loss, "nll": nll, "lr": lr, "tok_per_s": round(rate)},
                   grad_norm=round(norm, 4) if math.isfinite(norm) else None)
