"""What a resumable checkpoint carries besides the weights: progress and random state."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Progress:
    """Where training stands; saved in last.pt so --resume continues exactly."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # batches of this epoch already trained, by all ranks together
    world: int = 1  # ranks of the run that saved this (a resume may use another number)
    best: float | None = None  # best validation metric so far
    bad_evals: int = 0  # validations since the best one
    train_s: float = 0.0  # wall-clock seconds trained before this process (train.max_minutes)
    warmup_s: float = 0.0  # wall-clock seconds when warmup ended (a time-budgeted decay's start)
