"""One optimizer update: micro-batches under autocast, the loss, gradient scaling and clipping,
the schedule, and what to do with a non-finite loss or gradient."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.nn.parallel import DistributedDataParallel

from mt.config import TrainConfig
from mt.data import Batch
from mt.loss import label_smoothed_loss
from mt.model import Seq2Seq
from mt.train.distributed import Group
from mt.train.schedule import lr_at
from mt.train.state import Progress
from mt.train.stopping import Stopping
from mt.vocab import PAD

MAX_BAD_STEPS = 5  # consecutive steps with a non-finite loss or gradient before the run stops


@dataclass
class StepResult:
    """What one update did."""

    loss: torch.Tensor  # this rank's mean loss, on the device (not read: no sync); NaN if skipped
    stats: torch.Tensor  # (3,) this rank's label-smoothed loss sum, NLL sum, target tokens
    skipped: str = ""  # why the update was skipped, as its metrics event: nonfinite_loss/_grad
    why: str = ""  # the same, for the user
    in_a_row: int = 0  # updates skipped in a row, this one included
    give_up: bool = False  # MAX_BAD_STEPS in a row: the run is to save and stop


def to_device(batch: Batch, device: torch.device) -> Batch:
    """The batch on `device` (copied without waiting, on CUDA)."""
    if device.type == "cuda" and not batch.src.is_pinned():
        # Page-locked, so that the copy runs asynchronously, overlapping with compute
        # (training batches come pinned from the loader; validation batches do not).
        batch = batch.pin_memory()
    return batch.to(device)


class UpdateStep:
    """One update from this rank's micro-batches (all ranks take part in every update).

    The loss is normalised by the target tokens of the whole update, over micro-batches and
    ranks, so k micro-batches equal one k-times larger batch, and N ranks one rank with an
    N-times larger batch. All ranks agree on skipping and stopping through one all-reduced
    flag tensor, read once: the step's only host-device sync (fp16 aside).
    """

    def __init__(self, cfg: TrainConfig, model: Seq2Seq, optimizer: torch.optim.Optimizer,
                 scaler: torch.amp.GradScaler, amp: torch.dtype | None, group: Group,
                 stopping: Stopping, ddp: DistributedDataParallel | None = None):
        self.cfg, self.model, self.optimizer, self.scaler = cfg, model, optimizer, scaler
        self.amp, self.group, self.stopping, self.ddp = amp, group, stopping, ddp
        self.bad_steps = 0  # skipped in a row
        self.skipped_steps = 0  # skipped in all, by this process
        self.grad_norm = torch.tensor(math.nan)  # the latest update's, before clipping
        self.host_flags = torch.zeros(3, device=group.device)  # see Stopping.host_flags

    def __call__(self, net: Callable, micro: Sequence[Batch], idle: bool,
                 progress: Progress) -> StepResult:
        """net: the model, or a wrapper of it (DDP, compiled). idle: this rank has no batch
        left in the epoch's last update; it runs micro[0] at weight 0, since every rank joins
        the gradient all-reduce."""
        self.optimizer.zero_grad(set_to_none=True)
        micro = tuple(to_device(b, self.group.device) for b in micro)
        tokens = sum((b.tgt_out != PAD).sum() for b in micro) * (0 if idle else 1)
        if self.group.world > 1:
            tokens = tokens.float()
            self.group.sum(tokens)  # stays on the device: the division below needs no sync
        # DDP averages gradients over ranks: times world, they are sums again.
        scale = self.group.world / tokens
        stats = torch.zeros(3, device=self.group.device)
        for i, batch in enumerate(micro):
            last = i == len(micro) - 1
            with contextlib.nullcontext() if last or self.ddp is None else self.ddp.no_sync():
                stats += self._micro_batch(net, batch, 0.0 if idle else scale)
        return self._update(stats, progress)

    def _micro_batch(self, net: Callable, batch: Batch,
                     scale: torch.Tensor | float) -> torch.Tensor:
        """Forward and backward of one batch (on the device); returns its stats."""
        with torch.autocast(self.group.device.type, dtype=self.amp, enabled=self.amp is not None):
            states = net(batch.src, batch.tgt_in, project=False)
        loss, nll = label_smoothed_loss(states, self.model.generator.weight, batch.tgt_out,
                                        self.cfg.label_smoothing, self.amp,
                                        self.model.logits_bias)
        self.scaler.scale(loss * scale).backward()
        tokens = (batch.tgt_out != PAD).sum().float()
        return torch.stack([loss.detach(), nll, tokens]) * (scale != 0)

    def _update(self, stats: torch.Tensor, progress: Progress) -> StepResult:
        """Clip, agree with the other ranks, then skip or step and schedule."""
        t = self.cfg
        self.scaler.unscale_(self.optimizer)  # a no-op without fp16
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.clip_norm or math.inf)
        self.grad_norm = norm.detach()
        for flag, value in zip(self.host_flags, self.stopping.host_flags(progress)):
            flag.fill_(value)  # kernel launches, not copies: no sync
        flags = torch.cat([torch.stack([~torch.isfinite(stats[0]), ~torch.isfinite(norm)]).float(),
                           self.host_flags])
        self.group.max(flags)  # ranks' clocks differ: they agree on the largest time share
        bad_loss, bad_grad, signalled, out_of_time, time_done = flags.tolist()
        self.stopping.agree(signalled, out_of_time)
        if bad_loss:
            return self._skip(stats, "nonfinite_loss", "loss is not finite")
        # A finite loss can still overflow in backward; stepping would write NaN weights.
        # (fp16's scaler skips such steps itself, and lowers its scale.)
        if bad_grad and not self.scaler.is_enabled():
            return self._skip(stats, "nonfinite_grad", "gradient norm is not finite")
        self.bad_steps = 0
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(progress.step + 1, t.lr, t.warmup, t.schedule, t.max_steps,
                                time_done)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return StepResult(stats[0] / stats[2].clamp(min=1), stats)

    def _skip(self, stats: torch.Tensor, event: str, why: str) -> StepResult:
        """Skip the update but keep the step (the next batch may well be fine); count it, and
        give up after MAX_BAD_STEPS in a row."""
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler.is_enabled():
            self.scaler.update()  # lowers the scale; unscale_ may be called again
        self.bad_steps += 1
        self.skipped_steps += 1
        return StepResult(torch.tensor(float("nan")), stats, event, why, self.bad_steps,
                          self.bad_steps >= MAX_BAD_STEPS)
