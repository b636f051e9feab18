"""One process of a distributed test run (tests/test_train_distributed.py starts several, as
torchrun would).

Trains with mt's Trainer, appending to TRACE.RANK the epoch and batch positions of every update
it trains, and sends itself SIGTERM after step `signal_at` when asked. Errors end it as `mt`
does: one line on stderr and the exit code.
"""

import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mt.config import load_config  # noqa: E402
from mt.errors import MTError  # noqa: E402
from mt.train.loop import Trainer


def main() -> None:
    spec = json.loads(sys.argv[1])
    cfg = load_config(spec["config"], spec["sets"])
    trainer = Trainer(cfg, Path(spec["run"]), "cpu", spec.get("resume", False))
    take, step = trainer.take, trainer.step

    def traced_take(batches, positions):
        with open(f"{spec['trace']}.{trainer.rank}", "a") as f:
            f.write(json.dumps([trainer.progress.epoch, positions]) + "\n")
        return take(batches, positions)

    def step_then_signal(*micro, **kwargs):
        result = step(*micro, **kwargs)
        if trainer.progress.step == spec.get("signal_at") and trainer.rank == spec["signal_rank"]:
            os.kill(os.getpid(), signal.SIGTERM)
        return result

    trainer.take, trainer.step = traced_take, step_then_signal
    try:
        print(json.dumps(trainer.fit()))
    except MTError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
