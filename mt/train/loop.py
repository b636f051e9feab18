"""The training loop: epochs of updates, with validation, checkpoints and early stopping.

Runs on CPU or one GPU, or on several processes under `torchrun` (DistributedDataParallel).
The pieces it calls: run_dir (checks and lock), run_data (the data), step (one update),
stopping (when and why to stop), validate, state (what last.pt holds for --resume),
metrics_log (metrics.jsonl), distributed (the ranks).
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from mt import log
from mt.checkpoint import BEST, LAST, load_weights, run_state, save_checkpoint, step_checkpoint_name
from mt.config import Config
from mt.data import Batch
from mt.device import autocast_dtype
from mt.errors import RunError
from mt.model import Seq2Seq, make_model
from mt.threads import follow_load
from mt.train.distributed import Group, epoch_updates
from mt.train.ema import EMA
from mt.train.finetune import Parent
from mt.train.lineage import trained
from mt.train.memory import format_peak, peak_memory, release_freed
from mt.train.metrics_log import TrainingLog, read_metrics
from mt.train.run_data import RunData, load_run_data
from mt.train.run_dir import Claim, claim_run_dir, prune_step_checkpoints, write_run_files
from mt.train.state import Clock, Progress, resumable_state, resume_from
from mt.train.step import StepResult, UpdateStep
from mt.train.stopping import Stopping, StopReason
from mt.train.validate import validate

RELEASE_EVERY = 3  # updates between returns of freed memory (release_freed): see memory.py


class Trainer:
    """Runs `fit`: prepare_run_dir (rank 0), load_data, build, then epochs of `step`s."""

    def __init__(self, cfg: Config, run_dir: Path, device: str = "auto", resume: bool = False,
                 parent: Parent | None = None, distilled: dict | None = None):
        """parent: the checkpoint a fine-tuned run starts from (mt.train.finetune). distilled:
        the teachers and corpora of a student (mt.commands.distill), for its lineage."""
        self.cfg, self.run_dir, self.resume, self.parent = cfg, Path(run_dir), resume, parent
        self.distilled = distilled
        self.group = Group(device)
        log.enabled = self.group.main
        self.tick = follow_load(cfg.train.threads)  # called from this thread, which trains
        self.amp = autocast_dtype(cfg.train.amp, self.group.device)
        self.progress = Progress()
        self.clock = Clock()
        self.stopping = Stopping(cfg.train, self.clock, self.group, self.run_dir / LAST)
        self.metrics = TrainingLog(self.run_dir, cfg.train.tensorboard, self.clock, self.group)
        self.checkpointed_at = -1  # step of the latest validation + save
        self.last_result: dict = {}  # of that validation
        self.claim: Claim | None = None  # the run directory, locked while training (rank 0)
        self.data: RunData | None = None  # set by load_data
        # Set by build:
        self.model: Seq2Seq | None = None
        self.net = None  # what the step runs: the model, or its DDP or compiled wrapper
        self.optimizer: torch.optim.Optimizer | None = None
        self.update: UpdateStep | None = None
        self.ema: EMA | None = None  # with train.ema_decay
        self.lineage: dict | None = None  # what every checkpoint records (mt.train.lineage)

    # What tests and benchmarks read.
    rank = property(lambda self: self.group.rank)
    world = property(lambda self: self.group.world)
    bad_steps = property(lambda self: self.update.bad_steps)
    stats = property(lambda self: self.metrics.stats)
    train_data = property(lambda self: self.data.train)
    val_data = property(lambda self: self.data.val)
    src_vocab = property(lambda self: self.data.src_vocab)
    tgt_vocab = property(lambda self: self.data.tgt_vocab)

    # --- set-up -----------------------------------------------------------------------------
    def prepare_run_dir(self) -> None:
        """Checks that need no data: fail here, before minutes of loading and tokenizing."""
        self.claim = claim_run_dir(self.run_dir, self.resume)

    def load_data(self) -> None:
        """Vocabularies, tokenizers, training and validation pairs (see mt.train.run_data)."""
        self.data = load_run_data(self.cfg, self.run_dir, self.resume, self.group,
                                self.parent.inherited if self.parent else None)

    def build(self) -> None:
        """The model and optimizer, afresh (a fine-tuned run: the parent's weights) or from
        last.pt (--resume); the EMA, when on; the lineage."""
        t, device = self.cfg.train, self.group.device
        torch.manual_seed(t.seed)
        random.seed(t.seed)
        self.model = make_model(self.cfg.model, len(self.src_vocab),
                                len(self.tgt_vocab)).to(device)
        if self.parent is not None:
            load_weights(self.model, {"model": self.parent.weights}, self.parent.checkpoint)
        self.ema = EMA(self.model, t.ema_decay) if t.ema_decay else None
        self.lineage = trained(self.cfg, self.data.fingerprint,
                               self.parent.record if self.parent else None, self.data.mix,
                               self.distilled)
        # fused: one kernel for all parameters, not one for each
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=t.lr,
                                          betas=(0.9, 0.98), eps=1e-9, fused=True)
        scaler = torch.amp.GradScaler("cuda", enabled=self.amp == torch.float16)
        if self.resume:
            p, lineage = resume_from(self.run_dir / LAST, self.model, self.optimizer, scaler,
                                     self.ema)
            self.progress, self.lineage = p, lineage or self.lineage
            log.info(f"resumed {self.run_dir} at step {p.step} (epoch {p.epoch}, batch "
                     f"{p.position}; saved by {p.world} process(es), now {self.world})")
        n_params = sum(p.numel() for p in self.model.parameters())
        log.info(f"model: {n_params / 1e6:.2f}M parameters on {device}"
                 + (f", autocast {self.amp}" if self.amp else "")
                 + (f", {self.world} processes" if self.world > 1 else ""))
        ddp = DistributedDataParallel(self.model) if self.world > 1 else None
        self.update = UpdateStep(t, self.model, self.optimizer, scaler, self.amp, self.group,
                                 self.stopping, ddp)
        self.net = self.model if ddp is None else ddp
        if t.compile:
            # Dynamic shapes: batch and sequence lengths change from batch to batch, and one
            # graph with symbolic sizes beats a recompile for each new shape.
            self.net = torch.compile(self.net, dynamic=True)
        if not self.resume and self.claim is not None:  # rank 0's (last: nothing fails after)
            d = self.data
            write_run_files(self.claim, self.cfg, d.src_vocab, d.tgt_vocab, d.tok_files)

    def _set_up(self) -> None:
        """Under torchrun, rank 0 alone owns the run directory. A run that fails while setting
        up (its config, data, tokenizers, token cache, model) takes back what it created there:
        without a checkpoint it holds nothing worth keeping."""
        try:
            if self.group.main:
                self.prepare_run_dir()
            self.load_data()
            self.build()
        except BaseException:
            if self.claim is not None:
                self.claim.undo()
                self.claim = None
            raise

    def _save(self, name: str, full: bool) -> None:
        """Rank 0 writes; full: with what --resume needs (last.pt)."""
        if not self.group.main:
            return
        d = self.data
        # With an EMA: last.pt keeps the raw weights (training continues from them) and the
        # average; best.pt and ckpt.STEP.pt hold the average (what was validated).
        weights = (self.model.state_dict() if full or self.ema is None
                   else self.ema.weights(self.model))
        state = run_state(weights, self.cfg, d.src_vocab, d.tgt_vocab, self.progress.step,
                          d.tok_files, d.starters)
        state["lineage"] = self.lineage
        if d.shortlist is not None:
            state["shortlist"] = d.shortlist.to_state()
        if full:
            state.update(resumable_state(self.optimizer, self.progress, self.update.scaler,
                                         self.world, self.clock, self.ema))
        save_checkpoint(self.run_dir / name, state)

    # --- the loop ---------------------------------------------------------------------------
    def fit(self) -> dict:
        """Train to the end; returns the last step, the best metric and the last validation."""
        self._set_up()
        t, p = self.cfg.train, self.progress
        if self.resume and (why := self.stopping.finished(p)):
            return self._nothing_to_do(why)
        per_epoch = -(-len(self.train_data.plan(t.max_tokens, seed=t.seed))
                      // (self.world * t.accum_steps))
        bar = tqdm(total=t.max_steps or per_epoch * t.max_epochs, initial=p.step, desc="train",
                   unit=" step", disable=not self.group.main or None, file=sys.stderr,
                   dynamic_ncols=True)
        self.metrics.restart(p.step)
        with contextlib.closing(bar), self.stopping.catching_signals():
            if self.parent is not None and p.step == 0 and not self.resume:
                self._checkpoint()  # the parent on the new data: the score to beat
            self._epochs(bar)
        if self.stopping.reason is StopReason.SIGNAL:
            self._save(LAST, full=True)
            self.group.barrier()
            raise RunError(f"interrupted at step {p.step}; saved {self.run_dir / LAST}; "
                           "continue with --resume")
        if self.checkpointed_at != p.step:
            self._checkpoint()
        reason, final = self.stopping.reason.value, self.last_result
        self.metrics.write({"event": "end", "step": p.step, "reason": reason,
                            "skipped_steps": self.update.skipped_steps, **final})
        self.metrics.close()
        log.info(f"done at step {p.step} ({reason}); best {t.metric} {p.best}; "
                 f"run in {self.run_dir}")
        self.group.close()
        return {"step": p.step, "best": p.best, **final}

    def _nothing_to_do(self, why: str) -> dict:
        """A resumed run that is finished: its checkpoints and metrics stay as they are."""
        p = self.progress
        valid = [r for r in read_metrics(self.run_dir) if r.get("event") == "valid"]
        final = {k: v for k, v in (valid[-1] if valid else {}).items() if k.startswith("val_")}
        log.info(f"nothing to do: {self.run_dir} finished at step {p.step} ({why}); best "
                 f"{self.cfg.train.metric} {p.best}")
        self.group.close()
        return {"step": p.step, "best": p.best, **final}

    def _epochs(self, bar: tqdm) -> None:
        """Train until the stopping rules say so."""
        t, p = self.cfg.train, self.progress
        while p.epoch < t.max_epochs:
            # Batches depend only on (seed, epoch): a resumed run skips exactly the ones done.
            plan = self.train_data.plan(t.max_tokens, t.seed, p.epoch)
            n, stride = len(plan), self.world * t.accum_steps
            updates = epoch_updates(p.position, n, self.world, t.accum_steps, self.rank)
            # Collated in a background thread, a few batches ahead of the step that needs them.
            loader = self.train_data.loader(plan, (k for mine, _ in updates for k in mine),
                                            pin_memory=self.group.device.type == "cuda")
            self.model.train()
            with contextlib.closing(loader):  # stops the thread when training stops mid-epoch
                if not self._updates(updates, loader, stride, n, bar):
                    return
            p.epoch += 1
            p.position = 0
            if t.eval_epochs and self.checkpointed_at != p.step and not self._checkpoint():
                return
        self.stopping.epochs_done()

    def _updates(self, updates: list[tuple[list[int], bool]], loader: Iterator[Batch],
                 stride: int, n: int, bar: tqdm) -> bool:
        """The epoch's remaining updates; False when training is to end."""
        t, p = self.cfg.train, self.progress
        clock, tokens = time.perf_counter(), 0
        for mine, idle in updates:
            self.tick()  # threads follow the free cores (train.threads: 0)
            micro = [next(loader)] if idle else self.take(loader, mine)
            self.step(*micro, idle=idle)
            if not idle:
                tokens += sum(b.n_tgt_tokens for b in micro) * self.world
            p.position = min(p.position + stride, n)
            if p.step % RELEASE_EVERY == 0:
                release_freed()
            bar.update()
            if p.step % 10 == 0:  # host-side counts: no device sync
                rate = tokens / max(time.perf_counter() - clock, 1e-9)
                bar.set_postfix_str(f"{self.metrics.bar_loss} | lr {self._lr():.1e} | "
                                    f"tok/s {rate / 1000:.1f}k")
            if p.step % t.log_every == 0:
                self.metrics.interval(p, self._lr(), self.update.grad_norm)
            if self.stopping.interrupted():
                return False
            if p.step % t.eval_every == 0 and not self._checkpoint():
                return False
            if self.stopping.steps_done(p.step):
                return False
        return True

    def take(self, loader: Iterator[Batch], positions: list[int]) -> list[Batch]:
        """The batches at these positions of the epoch's plan (the loader yields them in order)."""
        return [next(loader) for _ in positions]

    def _lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    # --- one update -------------------------------------------------------------------------
    def step(self, *micro: Batch, idle: bool = False) -> torch.Tensor:
        """One update (see UpdateStep): returns this rank's mean loss as a device tensor (not
        read here: no sync), NaN when the update was skipped."""
        p = self.progress
        result = self.update(self.net, micro, idle, p)
        if result.skipped:
            self._skipped(result)
        p.step += 1
        if not result.skipped:
            if self.ema is not None:
                self.ema.update(self.model)
            if p.step == self.cfg.train.warmup:
                p.warmup_s = self.clock.trained(p)
            self.metrics.add(result.stats)
        return result.loss

    def _skipped(self, result: StepResult) -> None:
        """Log a skipped update; after too many in a row, save last.pt and stop the run."""
        p = self.progress
        self.metrics.write({"event": result.skipped, "step": p.step + 1,
                            "in_a_row": result.in_a_row,
                            "skipped_steps": self.update.skipped_steps})
        log.warn(f"step {p.step + 1}: {result.why}; update skipped ({result.in_a_row} in a row)")
        if result.give_up:
            self._save(LAST, full=True)
            self.group.barrier()
            raise RunError(f"loss or gradients were not finite for {result.in_a_row} steps in "
                           f"a row; stopped at step {p.step}, saved {self.run_dir / LAST} "
                           "(lower train.lr or check the data)")

    # --- validation -------------------------------------------------------------------------
    def validate(self) -> dict:
        """See mt.train.validate: every rank returns the same result. With an EMA, of the
        averaged weights."""
        with self.ema.applied(self.model) if self.ema else contextlib.nullcontext():
            return validate(self.cfg, self.model, self.data, self.progress.step, self.group,
                            self.amp)

    def _checkpoint(self) -> bool:
        """Validate, save last (and best, and ckpt.STEP.pt); False when patience is spent."""
        t, p = self.cfg.train, self.progress
        clock = time.perf_counter()
        release_freed()  # decoding's peak comes on top of what training left
        result = self.validate()
        self.checkpointed_at, self.last_result = p.step, result
        better = self.stopping.improved(p, result)
        if better:
            self._save(BEST, full=False)
        self._save(LAST, full=True)
        if t.keep_checkpoints and self.group.main:  # ckpt.STEP.pt, for `mt average`
            self._save(step_checkpoint_name(p.step), full=False)
            prune_step_checkpoints(self.run_dir, t.keep_checkpoints)
        release_freed()  # what decoding and saving freed
        self.metrics.pause(time.perf_counter() - clock)
        memory = peak_memory(self.group.device)
        self.metrics.write({"event": "valid", "step": p.step, "epoch": p.epoch, **result,
                            "best": p.best, **memory})
        shown = " | ".join(f"{k} {v}" for k, v in result.items())
        log.info(f"step {p.step} | {shown} | peak {format_peak(memory)}"
                 + (" | new best" if better else ""))
        return not self.stopping.patience_spent(p)
