"""What a resumable checkpoint carries besides the weights (mt.checkpoint.run_state): the
optimizer, the progress, the random state and the fp16 gradient scaler; the run's clock; and
which settings a resume may change."""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from mt.checkpoint import load_checkpoint, load_weights
from mt.config import Config
from mt.errors import CheckpointError
from mt.train.ema import EMA

# What a resume may change: when to stop, how often to validate, log and keep checkpoints,
# speed and reporting settings, and decoding (validation's BLEU). Anything else (the model, the
# data, the seed, batches, learning rate and schedule, loss, amp...) would make the resumed
# updates differ from those of an uninterrupted run with the new settings.
RESUME_MAY_CHANGE = ("train.max_epochs", "train.max_steps", "train.max_minutes",
                     "train.patience", "train.eval_every", "train.eval_epochs", "train.eval_bleu",
                     "train.log_every", "train.keep_checkpoints", "train.threads",
                     "train.compile", "train.tensorboard", "decode")
DECAY_END = ("train.max_steps", "train.max_minutes")  # where a cosine or linear decay ends


def resume_changes(old: Config, new: Config) -> list[str]:
    """The keys (section.key, in the config's order) that `new` changes from the resumed run's
    `old` config and that a resume may not change."""
    may = [k for k in RESUME_MAY_CHANGE
           if old.train.schedule == "inverse_sqrt" or k not in DECAY_END]
    a, b = old.to_dict(), new.to_dict()
    return [f"{s}.{k}" for s in b for k in b[s]
            if a[s][k] != b[s][k] and s not in may and f"{s}.{k}" not in may]


@dataclass
class Progress:
    """Where training stands; saved in last.pt so --resume continues exactly."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # batches of this epoch already trained, by all ranks together
    world: int = 1  # ranks of the run that saved this (a resume may use another number)
    best: float | None = None  # best validation metric so far
    best_loss: float | None = None  # the best's validation loss (Stopping.improved: BLEU 0)
    bad_evals: int = 0  # validations since the best one
    train_s: float = 0.0  # wall-clock seconds trained before this process (train.max_minutes)
    warmup_s: float = 0.0  # wall-clock seconds when warmup ended (a time-budgeted decay's start)


class Clock:
    """Wall-clock seconds since this process started, and of the whole run."""

    def __init__(self):
        self.started = time.time()

    def elapsed(self) -> float:
        """This process's seconds (a resumed run counts afresh)."""
        return time.time() - self.started

    def trained(self, progress: Progress) -> float:
        """The run's seconds so far, earlier processes (before --resume) included."""
        return progress.train_s + time.time() - self.started


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": list(random.getstate()[1])}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate((3, tuple(state["python"]), None))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def resumable_state(optimizer: torch.optim.Optimizer, progress: Progress,
                    scaler: torch.amp.GradScaler, world: int, clock: Clock,
                    ema: EMA | None = None) -> dict:
    """The entries last.pt adds to the weights' for --resume (progress.world becomes
    `world`: the number of ranks that saved it)."""
    progress.world = world
    state = {"optimizer": optimizer.state_dict(),
             "progress": {**asdict(progress), "train_s": clock.trained(progress)},
             "rng": rng_state(), "scaler": scaler.state_dict()}
    if ema is not None:
        state["ema"] = ema.state_dict()
    return state


def resume_from(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                scaler: torch.amp.GradScaler, ema: EMA | None = None
                ) -> tuple[Progress, dict | None]:
    """Load last.pt at `path`: the weights into the model, what resumable_state saved into the
    optimizer, the scaler, the random generators and the EMA; returns the progress and the
    checkpoint's lineage (None in one saved before lineages)."""
    state = load_checkpoint(path)
    load_weights(model, state, path)
    try:
        if ema is not None:
            ema.load_state_dict(state["ema"])
        optimizer.load_state_dict(state["optimizer"])
        saved = dict(state["progress"])
        if "batch_in_epoch" in saved:  # written before positions were global (1 rank)
            saved["position"] = saved.pop("batch_in_epoch")
        progress = Progress(**saved)
        set_rng_state(state["rng"])
        if scaler.is_enabled() and state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
    except (KeyError, TypeError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path}: cannot resume from it: training state missing or "
                              f"invalid ({e!r})") from None
    return progress, state.get("lineage")
