"""Why training stops, and the one object that decides it."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from enum import Enum
from pathlib import Path

import torch

from mt.config import TrainConfig
from mt.errors import RunError
from mt.train.distributed import Group
from mt.train.state import Clock, Progress


class StopReason(Enum):
    """Why a run ended; the value is what metrics.jsonl's "end" record writes."""

    MAX_EPOCHS = "max_epochs"
    MAX_STEPS = "max_steps"
    MAX_MINUTES = "max_minutes"
    PATIENCE = "patience"
    SIGNAL = "signal"


class Stopping:
    """Decides when training ends, the same way on every rank, and holds the reason.

    A signal and the time budget reach each process on its own: they travel to the others
    through the update step's flag all-reduce (host_flags goes in, agree takes what came out),
    so all ranks stop after the same step. Patience follows rank 0's validation.
    """

    def __init__(self, cfg: TrainConfig, clock: Clock, group: Group, last: Path):
        self.cfg, self.clock, self.group, self.last = cfg, clock, group, last
        self.signalled = False  # this process got SIGINT/SIGTERM; acted on once all agree
        self.reason: StopReason | None = None  # agreed by all ranks

    def on_signal(self, signum, frame) -> None:
        if self.signalled:  # a second Ctrl-C: the user will not wait for the save
            raise RunError(f"interrupted twice: stopped without saving; {self.last}, if there "
                           "is one, holds the previous checkpoint")
        self.signalled = True

    @contextlib.contextmanager
    def catching_signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM ask the loop to save and stop, between steps."""
        previous = {s: signal.signal(s, self.on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    def host_flags(self, progress: Progress) -> tuple[float, float, float]:
        """This process's view, for the step's all-reduce: signalled, out of time, and the share
        of the time budget after warmup already spent (the schedule's time_done)."""
        t = self.cfg
        out_of_time, time_done = False, 0.0
        if t.max_minutes:
            now, budget = self.clock.trained(progress), t.max_minutes * 60
            out_of_time = now >= budget
            if progress.step >= t.warmup:
                time_done = (now - progress.warmup_s) / max(budget - progress.warmup_s, 1e-9)
        return float(self.signalled), float(out_of_time), time_done

    def agree(self, signalled: float, out_of_time: float) -> None:
        """The largest of host_flags over ranks: if set, every rank stops after this step."""
        if signalled:
            self.reason = StopReason.SIGNAL  # rank 0 saves last.pt, and the run fails
        elif out_of_time:
            self.reason = StopReason.MAX_MINUTES  # the run validates, saves and ends

    def interrupted(self) -> bool:
        """Stop now, before the step's validation: a signal, or the time budget spent."""
        return self.reason in (StopReason.SIGNAL, StopReason.MAX_MINUTES)

    def finished(self, progress: Progress) -> str | None:
        """Why a resumed run has nothing left to do under this config's limits (None: it has):
        without this check a finished run would train one more step before the loop's limits
        are tested. A limit raised with --set lets it train on."""
        t = self.cfg
        done = [(t.max_steps and progress.step >= t.max_steps, StopReason.MAX_STEPS,
                 f"train.max_steps {t.max_steps} reached"),
                (progress.epoch >= t.max_epochs, StopReason.MAX_EPOCHS,
                 f"train.max_epochs {t.max_epochs} trained"),
                (t.max_minutes and progress.train_s >= t.max_minutes * 60,
                 StopReason.MAX_MINUTES, f"train.max_minutes {t.max_minutes} spent"),
                (t.patience and progress.bad_evals >= t.patience, StopReason.PATIENCE,
                 f"train.patience {t.patience}: as many validations without a new best")]
        for hit, reason, why in done:
            if hit:
                self.reason = reason
                key = why.split()[0]
                return f"{why}; raise {key} (--set {key}=N) to train on"
        return None

    def steps_done(self, step: int) -> bool:
        if not (self.cfg.max_steps and step >= self.cfg.max_steps):
            return False
        self.reason = StopReason.MAX_STEPS
        return True

    def epochs_done(self) -> None:
        self.reason = StopReason.MAX_EPOCHS

    def improved(self, progress: Progress, result: dict) -> bool:
        """Whether a validation's result is the best so far (by train.metric); counts it in
        progress.best and bad_evals, which patience_spent reads.

        A BLEU of 0 after a best of 0 cannot tell the two models apart (no 4-gram of the
        output matches yet: a new model, or a random one fine-tuned), so the validation loss
        decides; else patience would stop a run that is still learning, and best.pt would
        never move. progress.best_loss keeps the best's loss for this."""
        bleu = self.cfg.metric == "bleu"
        value = result["val_bleu"] if bleu else result["val_loss"]
        best, loss = progress.best, result.get("val_loss")
        if best is None:
            better = True
        elif bleu and value == best == 0:
            better = None not in (loss, progress.best_loss) and loss < progress.best_loss
        else:
            better = value > best if bleu else value < best
        if better:
            progress.best, progress.best_loss, progress.bad_evals = value, loss, 0
        else:
            progress.bad_evals += 1
        return better

    def patience_spent(self, progress: Progress) -> bool:
        """After a validation: train.patience validations in a row without a new best."""
        t = self.cfg
        stop = torch.tensor(float(t.patience > 0 and progress.bad_evals >= t.patience),
                            device=self.group.device)
        self.group.broadcast(stop)  # rank 0's decision, in case a reduction rounded differently
        if not stop.item():
            return False
        self.reason = StopReason.PATIENCE
        return True
