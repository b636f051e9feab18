"""The training loop: data and vocab set-up, steps, validation, checkpoints, early stopping.

Runs on CPU or one GPU, or on several processes under `torchrun` (DistributedDataParallel).
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import random
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from mt import log
from mt.checkpoint import (
    BEST,
    CONFIG,
    LAST,
    SRC_VOCAB,
    TGT_VOCAB,
    Run,
    load_checkpoint,
    load_weights,
    run_state,
    save_checkpoint,
    step_checkpoint_name,
    step_checkpoints,
)
from mt.config import Config
from mt.data import Batch, ParallelData, read_parallel, split_path
from mt.device import autocast_dtype, pick_device
from mt.errors import CheckpointError, DataError, RunError
from mt.loss import label_smoothed_loss
from mt.metrics import score
from mt.model import Seq2Seq, make_model
from mt.token_cache import open_cache
from mt.tokenizers import tokenizer_files
from mt.train.distributed import update_positions
from mt.train.metrics_log import MetricsSink
from mt.train.schedule import lr_at
from mt.train.state import Progress
from mt.train.stopping import Stop
from mt.translator import Translator
from mt.vocab import PAD, Vocab

MAX_BAD_STEPS = 5  # consecutive steps with a non-finite loss or gradient before the run stops


class Trainer:
    def __init__(self, cfg: Config, run_dir: Path, device: str = "auto", resume: bool = False):
        self.cfg, self.run_dir, self.resume = cfg, Path(run_dir), resume
        self.rank = int(os.environ.get("RANK", 0))
        self.world = int(os.environ.get("WORLD_SIZE", 1))
        self.main = self.rank == 0
        log.enabled = self.main
        self.device = pick_device(device)
        if self.world > 1:
            if self.device.type == "cuda":
                # modulo: ranks may share a GPU (with MT_DIST_BACKEND=gloo; NCCL refuses)
                local = int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count()
                self.device = torch.device("cuda", local)
                torch.cuda.set_device(self.device)
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            dist.init_process_group(os.environ.get("MT_DIST_BACKEND") or backend)
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        self.amp = autocast_dtype(cfg.train.amp, self.device)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp == torch.float16)
        self.progress = Progress()
        self.stop_reason: str | None = None  # agreed by all ranks
        self.signalled = False  # this process got SIGINT/SIGTERM; acted on once all agree
        self.bad_steps = 0
        self.skipped_steps = 0
        self.checkpointed_at = -1  # step of the latest validation + save
        self.last_result: dict = {}
        self.started = time.time()
        # On the device, read only at log intervals: label-smoothed loss, NLL, target tokens.
        self.stats = torch.zeros(3, device=self.device)
        self.ddp: DistributedDataParallel | None = None
        self.bar_loss = "loss -"  # the progress bar's loss, updated at log intervals
        self.interval_start = time.perf_counter()  # of the current log interval

    # --- set-up -----------------------------------------------------------------------------
    def prepare_run_dir(self) -> None:
        """Checks that need no data: fail here, before minutes of loading and tokenizing."""
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise RunError(f"{self.run_dir}: exists and is not a directory; choose another --out")
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RunError(f"{self.run_dir}: cannot create the run directory ({e.strerror}); "
                           "choose another --out") from None
        if not os.access(self.run_dir, os.W_OK):
            raise RunError(f"{self.run_dir}: run directory is not writable; choose another --out")
        # An flock dies with its process, so a crashed run never leaves a stale lock behind.
        # Append mode: opening it changes nothing in a run that is then refused.
        self._lock = open(self.run_dir / ".lock", "a")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunError(f"{self.run_dir}: another training run is using this directory; wait "
                           "for it to finish or choose another --out") from None
        # Only a checkpoint makes a run worth keeping: one stopped before its first save starts
        # afresh (its config and vocab are rewritten).
        if (self.run_dir / LAST).exists() and not self.resume:
            raise RunError(f"{self.run_dir}: holds a run already; add --resume to continue it, "
                           "or choose another --out")
        if self.resume and not (self.run_dir / LAST).exists():
            raise RunError(f"{self.run_dir}: nothing to resume (no {LAST}: the run stopped "
                           "before its first checkpoint); run again without --resume")
        free = shutil.disk_usage(self.run_dir).free
        if free < 50 * 2**20:
            raise RunError(f"{self.run_dir}: only {free // 2**20} MiB free on disk; free some "
                           "space or choose another --out")
        # A checkpoint save cut short by kill -9 leaves its temporary file (see atomic_write);
        # holding the lock, this run is the only one that could still be writing them.
        for name in (BEST, LAST):
            for tmp in self.run_dir.glob(f".{name}.*.tmp"):
                tmp.unlink(missing_ok=True)
                log.info(f"removed {tmp}, left by an interrupted save")

    def load_data(self) -> None:
        d = self.cfg.data
        vocabs = None
        if self.resume:
            vocabs = Vocab.load(self.run_dir / SRC_VOCAB), Vocab.load(self.run_dir / TGT_VOCAB)
        # The training split comes from the token cache (mt.token_cache). Under torchrun rank 0
        # builds it, if it must, while the other ranks wait here; then every rank maps the same
        # arrays.
        if not self.main:
            dist.barrier()
        try:
            cache = open_cache(d, vocabs)
        finally:
            if self.main and self.world > 1:
                dist.barrier()
        self.src_vocab, self.tgt_vocab = vocabs or cache.vocabs
        self.src_tok, self.tgt_tok = cache.tokenizers()
        if self.main and not self.resume:
            cache.copy_tokenizer_files(self.run_dir)
        # What checkpoints carry of the tokenizers (e.g. a SentencePiece model): read once.
        self.tok_files = ({n: (self.run_dir / n).read_bytes() for n in tokenizer_files(d)}
                          if self.main else {})
        self.train_data = cache.data()
        dropped = self.train_data.filter_length(d.max_len)
        if not len(self.train_data):
            raise DataError(f"{split_path(d.dir, d.train, d.src_lang)}: no training pairs left "
                            f"after dropping empty ones and those over data.max_len={d.max_len} "
                            "tokens")
        val_src, val_tgt = read_parallel(split_path(d.dir, d.val, d.src_lang),
                                         split_path(d.dir, d.val, d.tgt_lang))
        self.val_data = ParallelData.from_text(val_src, val_tgt, self.src_tok, self.tgt_tok,
                                               self.src_vocab, self.tgt_vocab)
        self.val_data.filter_length(self.cfg.model.max_positions - 2)
        self.val_src, self.val_ref = val_src, val_tgt
        log.info(f"data: {len(self.train_data)} training pairs ({dropped} dropped: empty or over "
                 f"{d.max_len} tokens), {len(val_src)} validation; vocab src {len(self.src_vocab)} "
                 f"tgt {len(self.tgt_vocab)}")

    def build(self) -> None:
        t = self.cfg.train
        torch.manual_seed(t.seed)
        random.seed(t.seed)
        self.model: Seq2Seq = make_model(self.cfg.model, len(self.src_vocab),
                                         len(self.tgt_vocab)).to(self.device)
        # fused: one kernel over all parameters (3x faster than the per-parameter loop on CPU)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=t.lr,
                                          betas=(0.9, 0.98), eps=1e-9, fused=True)
        if self.resume:
            state = load_checkpoint(self.run_dir / LAST)
            load_weights(self.model, state, self.run_dir / LAST)
            try:
                self.optimizer.load_state_dict(state["optimizer"])
                saved = dict(state["progress"])
                if "batch_in_epoch" in saved:  # written before positions were global (1 rank)
                    saved["position"] = saved.pop("batch_in_epoch")
                self.progress = Progress(**saved)
                self._set_rng(state["rng"])
                if self.scaler.is_enabled() and state.get("scaler"):
                    self.scaler.load_state_dict(state["scaler"])
            except (KeyError, TypeError, ValueError, RuntimeError) as e:
                raise CheckpointError(f"{self.run_dir / LAST}: cannot resume from it: training "
                                      f"state missing or invalid ({e!r})") from None
            p = self.progress
            log.info(f"resumed {self.run_dir} at step {p.step} (epoch {p.epoch}, batch "
                     f"{p.position}; saved by {p.world} process(es), now {self.world})")
        elif self.main:
            self.cfg.save(self.run_dir / CONFIG)
            self.src_vocab.save(self.run_dir / SRC_VOCAB)
            self.tgt_vocab.save(self.run_dir / TGT_VOCAB)
        n_params = sum(p.numel() for p in self.model.parameters())
        log.info(f"model: {n_params / 1e6:.2f}M parameters on {self.device}"
                 + (f", autocast {self.amp}" if self.amp else "")
                 + (f", {self.world} processes" if self.world > 1 else ""))
        self.net = self.model
        if self.world > 1:
            self.net = self.ddp = DistributedDataParallel(self.model)
        if t.compile:
            # Dynamic shapes: batch and sequence lengths change from batch to batch, and one
            # graph with symbolic sizes beats a recompile for each new shape.
            self.net = torch.compile(self.net, dynamic=True)
        self._host_flags = torch.zeros(3, device=self.device)  # signal, out of time, time_done

    # --- state ------------------------------------------------------------------------------
    @staticmethod
    def _get_rng() -> dict:
        state = {"torch": torch.get_rng_state(), "python": list(random.getstate()[1])}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    @staticmethod
    def _set_rng(state: dict) -> None:
        torch.set_rng_state(state["torch"])
        random.setstate((3, tuple(state["python"]), None))
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])

    def _save(self, name: str, full: bool) -> None:
        if not self.main:
            return
        state = run_state(self.model.state_dict(), self.cfg, self.src_vocab, self.tgt_vocab,
                          self.progress.step, self.tok_files)
        if full:
            self.progress.world = self.world
            state.update(optimizer=self.optimizer.state_dict(),
                         progress={**asdict(self.progress), "train_s": self._trained_s()},
                         rng=self._get_rng(), scaler=self.scaler.state_dict())
        save_checkpoint(self.run_dir / name, state)

    def _keep_step_checkpoint(self) -> None:
        """ckpt.STEP.pt for `mt average`: the newest train.keep_checkpoints, older ones removed
        only once the new one is complete."""
        keep = self.cfg.train.keep_checkpoints
        if not keep or not self.main:
            return
        self._save(step_checkpoint_name(self.progress.step), full=False)
        for _, path in step_checkpoints(self.run_dir)[:-keep]:
            path.unlink(missing_ok=True)

    def _trained_s(self) -> float:
        """Wall-clock seconds of this run so far, earlier processes (before --resume) included."""
        return self.progress.train_s + time.time() - self.started

    def _log(self, record: dict) -> None:
        if self.main:
            # Wall-clock seconds since this process started (a resumed run counts afresh).
            record["elapsed_s"] = round(time.time() - self.started, 1)
            if record["event"] == "train" and "grad_norm" not in record:
                norm = float(getattr(self, "grad_norm", math.nan))  # the latest step's
                record["grad_norm"] = round(norm, 4) if math.isfinite(norm) else None
            if getattr(self, "sink", None) is None:
                self.sink = MetricsSink(self.run_dir, self.cfg.train.tensorboard)
            self.sink.write(record)
            if record["event"] == "end":
                self.sink.close()

    def _barrier(self) -> None:
        """Under torchrun: wait for every rank (e.g. for rank 0's save before anyone exits, or
        torchrun stops rank 0 mid-save when the first rank exits with an error)."""
        if self.world > 1:
            dist.barrier()

    # --- the loop ---------------------------------------------------------------------------
    def fit(self) -> dict:
        if self.main:  # under torchrun, rank 0 alone owns the run directory
            self.prepare_run_dir()
        self.load_data()
        self.build()
        t = self.cfg.train
        per_epoch = -(-len(self.train_data.plan(t.max_tokens, seed=t.seed))
                      // (self.world * t.accum_steps))
        total = t.max_steps or per_epoch * t.max_epochs
        self.bar = tqdm(total=total, initial=self.progress.step, desc="train", unit=" step",
                        disable=not self.main or None, file=sys.stderr, dynamic_ncols=True)
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        self.interval_start = time.perf_counter()
        try:
            self._epochs()
        except Stop:
            pass
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            self.bar.close()
        if self.stop_reason == "signal":
            self._save(LAST, full=True)
            self._barrier()
            raise RunError(f"interrupted at step {self.progress.step}; saved "
                           f"{self.run_dir / LAST}; continue with --resume")
        if self.checkpointed_at != self.progress.step:
            with contextlib.suppress(Stop):
                self._checkpoint()
        final = self.last_result
        self._log({"event": "end", "step": self.progress.step, "reason": self.stop_reason,
                   "skipped_steps": self.skipped_steps, **final})
        log.info(f"done at step {self.progress.step} ({self.stop_reason}); best "
                 f"{t.metric} {self.progress.best}; run in {self.run_dir}")
        if self.world > 1:
            self._barrier()
            dist.destroy_process_group()
        return {"step": self.progress.step, "best": self.progress.best, **final}

    def _on_signal(self, signum, frame) -> None:
        if self.signalled:  # a second Ctrl-C: the user will not wait for the save
            raise RunError(f"interrupted twice: stopped without saving; {self.run_dir / LAST}, "
                           "if there is one, holds the previous checkpoint")
        self.signalled = True  # acted on between steps, once all ranks know (see _update)

    def _epochs(self) -> None:
        t, p = self.cfg.train, self.progress
        while p.epoch < t.max_epochs:
            # Batches depend only on (seed, epoch): a resumed run skips exactly the ones done.
            plan = self.train_data.plan(t.max_tokens, seed=t.seed + p.epoch)
            n, stride = len(plan), self.world * t.accum_steps
            # This rank's micro-batch positions for each remaining update of the epoch; a rank
            # left without a batch in the last update runs one at weight 0 (idle).
            updates = []
            for start in range(p.position, n, stride):
                mine = update_positions(start, n, self.world, t.accum_steps, self.rank)
                updates.append((mine or [start], not mine))
            # Collated in a background thread, a few batches ahead of the step that needs them.
            loader = self.train_data.loader(plan, (k for mine, _ in updates for k in mine),
                                            pin_memory=self.device.type == "cuda")
            self.model.train()
            with contextlib.closing(loader):  # stops the thread when training stops mid-epoch
                self._updates(updates, loader, stride, n)
            p.epoch += 1
            p.position = 0
            if t.eval_epochs and self.checkpointed_at != p.step:
                self._checkpoint()
        self.stop_reason = "max_epochs"

    def _updates(self, updates: list[tuple[list[int], bool]], loader: Iterator[Batch],
                 stride: int, n: int) -> None:
        """The epoch's remaining updates; raises Stop when training is to end."""
        t, p = self.cfg.train, self.progress
        clock, tokens = time.perf_counter(), 0
        for mine, idle in updates:
            micro = [next(loader)] if idle else self.take(loader, mine)
            self.step(*micro, idle=idle)
            if not idle:
                tokens += sum(b.n_tgt_tokens for b in micro) * self.world
            p.position = min(p.position + stride, n)
            self.bar.update()
            if p.step % 10 == 0:  # host-side counts: no device sync
                rate = tokens / max(time.perf_counter() - clock, 1e-9)
                self.bar.set_postfix_str(f"{self.bar_loss} | lr {self._lr():.1e} | "
                                         f"tok/s {rate / 1000:.1f}k")
            if p.step % t.log_every == 0:
                self._log_interval()
            if self.stop_reason in ("signal", "max_minutes"):
                raise Stop
            if p.step % t.eval_every == 0:
                self._checkpoint()
            if t.max_steps and p.step >= t.max_steps:
                self.stop_reason = "max_steps"
                raise Stop

    def take(self, loader: Iterator[Batch], positions: list[int]) -> list[Batch]:
        """The batches at these positions of the epoch's plan (the loader yields them in order)."""
        return [next(loader) for _ in positions]

    def _to_device(self, batch: Batch) -> Batch:
        if self.device.type == "cuda" and not batch.src.is_pinned():
            # Page-locked, so that the copy runs asynchronously, overlapping with compute
            # (training batches come pinned from the loader; validation batches do not).
            batch = batch.pin_memory()
        return batch.to(self.device)

    def _log_interval(self) -> None:
        """Read the interval's loss statistics (one sync), log them, start a new interval."""
        p, stats = self.progress, self.stats
        if self.world > 1:
            dist.all_reduce(stats)
        loss, nll, tokens = stats.tolist()
        stats.zero_()
        now = time.perf_counter()
        rate = tokens / max(now - self.interval_start, 1e-9)
        self.interval_start = now
        loss, nll = ((round(x / tokens, 4) if tokens and math.isfinite(x) else None)
                     for x in (loss, nll))
        self._log({"event": "train", "step": p.step, "epoch": p.epoch, "loss": loss, "nll": nll,
                   "lr": self._lr(), "tok_per_s": round(rate)})
        self.bar_loss = f"loss {loss} | nll {nll}"

    def _lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    # --- one update -------------------------------------------------------------------------
    def step(self, *micro: Batch, idle: bool = False) -> torch.Tensor:
        """One update from this rank's micro-batches (all ranks take part in every update).

        The loss is normalised by the target tokens of the whole update, over micro-batches
        and ranks, so k micro-batches equal one k-times larger batch, and N ranks one rank
        with an N-times larger batch. idle: this rank has no batch left in the epoch's last
        update; it runs micro[0] at weight 0, since every rank joins the gradient all-reduce.
        Returns this rank's mean loss as a device tensor (not read here: no sync).
        """
        self.optimizer.zero_grad(set_to_none=True)
        micro = tuple(self._to_device(b) for b in micro)
        tokens = sum((b.tgt_out != PAD).sum() for b in micro) * (0 if idle else 1)
        if self.world > 1:
            tokens = tokens.float()
            dist.all_reduce(tokens)  # stays on the device: the division below needs no sync
        # DDP averages gradients over ranks: times world, they are sums again.
        scale = self.world / tokens
        stats = torch.zeros(3, device=self.device)
        for i, batch in enumerate(micro):
            last = i == len(micro) - 1
            with contextlib.nullcontext() if last or self.ddp is None else self.ddp.no_sync():
                stats += self._micro_batch(batch, 0.0 if idle else scale)
        return self._update(stats)

    def _micro_batch(self, batch: Batch, scale: torch.Tensor | float) -> torch.Tensor:
        """Forward and backward of one batch (on the device); returns [loss sum, NLL sum,
        target tokens]."""
        with torch.autocast(self.device.type, dtype=self.amp, enabled=self.amp is not None):
            logits = self.net(batch.src, batch.tgt_in)
        loss, nll = label_smoothed_loss(logits, batch.tgt_out, self.cfg.train.label_smoothing)
        self.scaler.scale(loss * scale).backward()
        tokens = (batch.tgt_out != PAD).sum().float()
        return torch.stack([loss.detach(), nll, tokens]) * (scale != 0)

    def _update(self, stats: torch.Tensor) -> torch.Tensor:
        """Clip, check, step and schedule. All ranks agree on skipping and stopping through one
        all-reduced flag tensor, read once: the step's only host-device sync (fp16 aside)."""
        t, p = self.cfg.train, self.progress
        self.scaler.unscale_(self.optimizer)  # a no-op without fp16
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.clip_norm or math.inf)
        self.grad_norm = norm.detach()  # logged with the train events (before clipping)
        out_of_time, time_done = False, 0.0
        if t.max_minutes:
            now, budget = self._trained_s(), t.max_minutes * 60
            out_of_time = now >= budget
            if p.step >= t.warmup:
                time_done = (now - p.warmup_s) / max(budget - p.warmup_s, 1e-9)
        self._host_flags[0].fill_(float(self.signalled))  # kernel launches, not copies: no sync
        self._host_flags[1].fill_(float(out_of_time))
        self._host_flags[2].fill_(time_done)  # ranks' clocks differ: they agree on the largest
        flags = torch.cat([torch.stack([~torch.isfinite(stats[0]), ~torch.isfinite(norm)]).float(),
                           self._host_flags])
        if self.world > 1:
            dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        bad_loss, bad_grad, signalled, out_of_time, time_done = flags.tolist()
        if signalled:
            self.stop_reason = "signal"  # every rank stops after this step, rank 0 saves
        elif out_of_time:  # every rank stops after this step; then validate and save
            self.stop_reason = "max_minutes"
        if bad_loss:
            return self._skip("nonfinite_loss", "loss is not finite")
        # A finite loss can still overflow in backward; stepping would write NaN weights.
        # (fp16's scaler skips such steps itself, and lowers its scale.)
        if bad_grad and not self.scaler.is_enabled():
            return self._skip("nonfinite_grad", "gradient norm is not finite")
        self.bad_steps = 0
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(p.step + 1, t.lr, t.warmup, t.schedule, t.max_steps, time_done)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        p.step += 1
        if p.step == t.warmup:
            p.warmup_s = self._trained_s()
        self.stats += stats
        return stats[0] / stats[2].clamp(min=1)

    def _skip(self, event: str, why: str) -> torch.Tensor:
        """Skip the update but keep the step (the next batch may well be fine); count it, and
        stop the run, saving last.pt, after MAX_BAD_STEPS in a row."""
        p = self.progress
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler.is_enabled():
            self.scaler.update()  # lowers the scale; unscale_ may be called again
        self.bad_steps += 1
        self.skipped_steps += 1
        self._log({"event": event, "step": p.step + 1, "in_a_row": self.bad_steps,
                   "skipped_steps": self.skipped_steps})
        log.warn(f"step {p.step + 1}: {why}; update skipped ({self.bad_steps} in a row)")
        if self.bad_steps >= MAX_BAD_STEPS:
            self._save(LAST, full=True)
            self._barrier()
            raise RunError(f"loss or gradients were not finite for {self.bad_steps} steps in a "
                           f"row; stopped at step {p.step}, saved {self.run_dir / LAST} "
                           "(lower train.lr or check the data)")
        p.step += 1
        return torch.tensor(float("nan"))

    # --- validation -------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> dict:
        """Loss and perplexity on the validation pairs; BLEU/chrF of greedy output.

        Under torchrun each rank takes its share of the batches and of the sentences to
        decode; the sums are all-reduced and the translations gathered, so every rank
        returns the same result.
        """
        self.model.eval()
        sums = torch.zeros(2, device=self.device)
        for batch in self.val_data.batches(self.cfg.train.max_tokens)[self.rank::self.world]:
            batch = self._to_device(batch)
            with torch.autocast(self.device.type, dtype=self.amp, enabled=self.amp is not None):
                logits = self.model(batch.src, batch.tgt_in)
            nll = label_smoothed_loss(logits, batch.tgt_out, 0.0)[1]
            sums += torch.stack([nll, (batch.tgt_out != PAD).sum().float()])
        if self.world > 1:
            dist.all_reduce(sums)
        nll_sum, n = sums.tolist()
        result = {"val_loss": round(nll_sum / n, 4), "val_ppl": round(math.exp(nll_sum / n), 2)}
        if self.cfg.train.eval_bleu:
            run = Run(self.cfg, self.model, self.src_vocab, self.tgt_vocab, self.progress.step,
                      self.src_tok, self.tgt_tok)
            greedy = replace(self.cfg.decode, beam=1, nbest=1)  # fast, whatever decode.beam is
            mine = Translator(run, greedy, device=self.device).translate(
                self.val_src[self.rank::self.world])
            hyps = mine
            if self.world > 1:
                parts: list = [None] * self.world
                dist.all_gather_object(parts, mine)
                hyps = [""] * len(self.val_src)
                for rank, part in enumerate(parts):
                    hyps[rank::self.world] = part
            scores = score(hyps, self.val_ref, self.cfg.data.tgt_lang)
            result.update(val_bleu=scores["bleu"], val_chrf=scores["chrf"])
        self.model.train()
        return result

    def _checkpoint(self) -> None:
        """Validate, save last (and best), and decide on early stopping."""
        t, p = self.cfg.train, self.progress
        clock = time.perf_counter()
        result = self.validate()
        self.checkpointed_at, self.last_result = p.step, result
        value = result["val_bleu"] if t.metric == "bleu" else result["val_loss"]
        better = p.best is None or (value > p.best if t.metric == "bleu" else value < p.best)
        if better:
            p.best, p.bad_evals = value, 0
            self._save(BEST, full=False)
        else:
            p.bad_evals += 1
        self._save(LAST, full=True)
        self._keep_step_checkpoint()
        self.interval_start += time.perf_counter() - clock  # tok/s counts training time only
        self._log({"event": "valid", "step": p.step, "epoch": p.epoch, **result, "best": p.best})
        shown = " | ".join(f"{k} {v}" for k, v in result.items())
        log.info(f"step {p.step} | {shown}" + (" | new best" if better else ""))
        stop = torch.tensor(float(t.patience > 0 and p.bad_evals >= t.patience),
                            device=self.device)
        if self.world > 1:  # rank 0's decision, in case a reduction rounded differently
            dist.broadcast(stop, src=0)
        if stop.item():
            self.stop_reason = "patience"
            raise Stop
