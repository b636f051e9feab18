"""Where training's metrics go: one JSON object a line in metrics.jsonl and, optionally,
TensorBoard scalars in RUN/tb. Every record passes through `MetricsSink.write`;
`read_metrics` reads them back (for `mt plot` and `mt info`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from mt.errors import ConfigError, DataError

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
