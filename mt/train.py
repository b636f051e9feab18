"""The training loop: data and vocab set-up, steps, validation, checkpoints, early stopping.

Runs on CPU or one GPU, or on several processes under `torchrun` (DistributedDataParallel).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import random
import shutil
import signal
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from mt import log
from mt.cache import open_cache
from mt.checkpoint import (
    BEST,
    CONFIG,
    LAST,
    SRC_VOCAB,
    TGT_VOCAB,
    Run,
    load_checkpoint,
    load_weights,
    save_checkpoint,
)
from mt.config import Config, load_config
from mt.data import ParallelData, read_parallel, split_path
from mt.errors import CheckpointError, ConfigError, DataError, RunError
from mt.evaluate import score
from mt.model import Seq2Seq, make_model
from mt.translate import Translator
from mt.vocab import PAD, Vocab

MAX_BAD_STEPS = 5  # consecutive steps with a non-finite loss or gradient before the run stops


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float,
                        pad_id: int = PAD) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed label-smoothed cross-entropy and summed NLL over non-pad targets.

    logits (B, T, V), target (B, T). Smoothing spreads `smoothing` uniformly over all V
    classes (the target included), as torch's cross_entropy does.
    """
    flat, tgt = logits.reshape(-1, logits.size(-1)).float(), target.reshape(-1)
    loss = F.cross_entropy(flat, tgt, ignore_index=pad_id, label_smoothing=smoothing,
                           reduction="sum")
    nll = F.cross_entropy(flat.detach(), tgt, ignore_index=pad_id, reduction="sum")
    return loss, nll


def lr_at(step: int, peak: float, warmup: int) -> float:
    """Linear warmup to `peak`, then decay with the inverse square root of the step."""
    step = max(step, 1)
    if warmup == 0:
        return peak
    return peak * min(step / warmup, math.sqrt(warmup / step))


@dataclass
class Progress:
    """Where training stands; saved in last.pt so --resume continues exactly."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of this epoch already trained
    best: float | None = None  # best validation metric so far
    bad_evals: int = 0  # validations since the best one


class Stop(Exception):
    """Raised inside the loop to end training early (early stopping, signal, step limit)."""


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RunError("--device cuda: no CUDA device is available here; use --device cpu")
    if name != "cpu" and not name.startswith("cuda"):
        raise RunError(f"--device {name}: expected auto, cpu or cuda")
    return torch.device(name)


def autocast_dtype(cfg: Config, device: torch.device) -> torch.dtype | None:
    if device.type != "cuda" or cfg.train.amp == "none":
        return None
    if cfg.train.amp == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[cfg.train.amp]


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
                self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
                torch.cuda.set_device(self.device)
            dist.init_process_group("nccl" if self.device.type == "cuda" else "gloo")
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        self.amp = autocast_dtype(cfg, self.device)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp == torch.float16)
        self.progress = Progress()
        self.stop_reason: str | None = None
        self.bad_steps = 0
        self.skipped_steps = 0
        self.checkpointed_at = -1  # step of the latest validation + save
        self.last_result: dict = {}
        self.started = time.time()

    # --- set-up -----------------------------------------------------------------------------
    def _prepare_run_dir(self) -> None:
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
            raise RunError(f"{self.run_dir}: only {free // 2**20} MiB free on disk")

    def _load_data(self) -> None:
        d = self.cfg.data
        vocabs = None
        if self.resume:
            vocabs = Vocab.load(self.run_dir / SRC_VOCAB), Vocab.load(self.run_dir / TGT_VOCAB)
        # The training split comes from the token cache (mt.cache). Under torchrun rank 0 builds
        # it, if it must, while the other ranks wait here; then every rank maps the same arrays.
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

    def _build(self) -> None:
        torch.manual_seed(self.cfg.train.seed)
        random.seed(self.cfg.train.seed)
        self.model: Seq2Seq = make_model(self.cfg.model, len(self.src_vocab), len(self.tgt_vocab),
                                         PAD).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.cfg.train.lr,
                                          betas=(0.9, 0.98), eps=1e-9)
        if self.resume:
            state = load_checkpoint(self.run_dir / LAST)
            load_weights(self.model, state, self.run_dir / LAST)
            try:
                self.optimizer.load_state_dict(state["optimizer"])
                self.progress = Progress(**state["progress"])
                self._set_rng(state["rng"])
            except (KeyError, TypeError, ValueError, RuntimeError) as e:
                raise CheckpointError(f"{self.run_dir / LAST}: cannot resume from it: training "
                                      f"state missing or invalid ({e!r})") from None
            log.info(f"resumed {self.run_dir} at step {self.progress.step}")
        elif self.main:
            self.cfg.save(self.run_dir / CONFIG)
            self.src_vocab.save(self.run_dir / SRC_VOCAB)
            self.tgt_vocab.save(self.run_dir / TGT_VOCAB)
        n_params = sum(p.numel() for p in self.model.parameters())
        log.info(f"model: {n_params / 1e6:.2f}M parameters on {self.device}"
                 + (f", autocast {self.amp}" if self.amp else ""))
        self.net = (DistributedDataParallel(self.model) if self.world > 1 else self.model)

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
        state = {"model": self.model.state_dict(), "step": self.progress.step}
        if full:
            state.update(optimizer=self.optimizer.state_dict(), progress=asdict(self.progress),
                         rng=self._get_rng())
        save_checkpoint(self.run_dir / name, state)

    def _log(self, record: dict) -> None:
        if self.main:
            # Wall-clock seconds since this process started (a resumed run counts afresh).
            record["elapsed_s"] = round(time.time() - self.started, 1)
            with open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    # --- the loop ---------------------------------------------------------------------------
    def fit(self) -> dict:
        if self.main:  # under torchrun, rank 0 alone owns the run directory
            self._prepare_run_dir()
        self._load_data()
        self._build()
        t = self.cfg.train
        per_epoch = len(self.train_data.plan(t.max_tokens, seed=t.seed)) // self.world
        total = t.max_steps or per_epoch * t.max_epochs
        self.bar = tqdm(total=total, initial=self.progress.step, desc="train", unit=" step",
                        disable=not self.main or None, file=sys.stderr, dynamic_ncols=True)
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
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
            dist.destroy_process_group()
        return {"step": self.progress.step, "best": self.progress.best, **final}

    def _on_signal(self, signum, frame) -> None:
        if self.stop_reason == "signal":  # a second Ctrl-C: the user will not wait for the save
            raise RunError(f"interrupted twice: stopped without saving; {self.run_dir / LAST}, "
                           "if there is one, holds the previous checkpoint")
        self.stop_reason = "signal"  # acted on between steps, so no step is left half-done

    def _epochs(self) -> None:
        t, p = self.cfg.train, self.progress
        while p.epoch < t.max_epochs:
            # Batches depend only on (seed, epoch): a resumed run skips exactly the ones done.
            # Rank r takes global positions r, r + world, ...; each is collated as it is reached.
            plan = self.train_data.plan(t.max_tokens, seed=t.seed + p.epoch)
            n = len(plan) // self.world * self.world
            positions = range(p.batch_in_epoch * self.world + self.rank, n, self.world)
            self.model.train()
            clock, tokens = time.perf_counter(), 0
            for batch in self.train_data.loader(plan, positions, self.device.type == "cuda"):
                loss = self._step(batch)
                p.batch_in_epoch += 1
                tokens += batch.n_tgt_tokens * self.world
                self.bar.update()
                if p.step % 10 == 0 or p.step == 1:
                    rate = tokens / max(time.perf_counter() - clock, 1e-9)
                    self.bar.set_postfix_str(f"loss {loss:.3f} | lr {self._lr():.1e} | "
                                             f"tok/s {rate / 1000:.1f}k")
                if p.step % t.log_every == 0:
                    rate = tokens / max(time.perf_counter() - clock, 1e-9)
                    self._log({"event": "train", "step": p.step, "epoch": p.epoch,
                               "loss": round(loss, 4) if math.isfinite(loss) else None,
                               "lr": self._lr(), "tok_per_s": round(rate)})
                if self.stop_reason == "signal":
                    raise Stop
                if p.step % t.eval_every == 0:
                    self._checkpoint()
                if t.max_steps and p.step >= t.max_steps:
                    self.stop_reason = "max_steps"
                    raise Stop
            p.epoch += 1
            p.batch_in_epoch = 0
            if self.checkpointed_at != p.step:
                self._checkpoint()
        self.stop_reason = "max_epochs"

    def _lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def _step(self, batch) -> float:
        t, p = self.cfg.train, self.progress
        batch = batch.to(self.device)
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(p.step + 1, t.lr, t.warmup)
        with torch.autocast(self.device.type, dtype=self.amp, enabled=self.amp is not None):
            logits = self.net(batch.src, batch.tgt_in)
        loss, _ = label_smoothed_loss(logits, batch.tgt_out, t.label_smoothing)
        loss = loss / batch.n_tgt_tokens
        self.optimizer.zero_grad(set_to_none=True)
        # Under DDP every process must take the same branch, or the others wait forever in the
        # gradient all-reduce: there a bad loss shows up in the (shared) gradient norm below.
        if self.world == 1 and not torch.isfinite(loss):
            return self._skip("nonfinite_loss", f"loss is {loss.item()}")
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)  # a no-op without fp16
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.clip_norm or math.inf)
        if not torch.isfinite(norm) and not self.scaler.is_enabled():
            # A finite loss can still overflow in backward; stepping would write NaN weights.
            # (fp16's scaler skips such steps itself, and lowers its scale.)
            return self._skip("nonfinite_grad", f"gradient norm is {norm.item()}")
        self.bad_steps = 0
        self.scaler.step(self.optimizer)
        self.scaler.update()
        p.step += 1
        return loss.item()

    def _skip(self, event: str, why: str) -> float:
        """Skip the update but keep the step (the next batch may well be fine); count it, and
        stop the run, saving last.pt, after MAX_BAD_STEPS in a row."""
        p = self.progress
        self.optimizer.zero_grad(set_to_none=True)
        self.bad_steps += 1
        self.skipped_steps += 1
        self._log({"event": event, "step": p.step + 1, "in_a_row": self.bad_steps,
                   "skipped_steps": self.skipped_steps})
        log.warn(f"step {p.step + 1}: {why}; update skipped ({self.bad_steps} in a row)")
        if self.bad_steps >= MAX_BAD_STEPS:
            self._save(LAST, full=True)
            raise RunError(f"loss or gradients were not finite for {self.bad_steps} steps in a "
                           f"row; stopped at step {p.step}, saved {self.run_dir / LAST} "
                           "(lower train.lr or check the data)")
        p.step += 1
        return float("nan")

    # --- validation -------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> dict:
        """Loss and perplexity on the validation pairs; BLEU/chrF of greedy output."""
        if not self.main:
            return {}
        self.model.eval()
        nll_sum, n = 0.0, 0
        for batch in self.val_data.batches(self.cfg.train.max_tokens):
            batch = batch.to(self.device)
            with torch.autocast(self.device.type, dtype=self.amp, enabled=self.amp is not None):
                logits = self.model(batch.src, batch.tgt_in)
            nll_sum += label_smoothed_loss(logits, batch.tgt_out, 0.0)[1].item()
            n += batch.n_tgt_tokens
        result = {"val_loss": round(nll_sum / n, 4), "val_ppl": round(math.exp(nll_sum / n), 2)}
        if self.cfg.train.eval_bleu:
            run = Run(self.cfg, self.model, self.src_vocab, self.tgt_vocab, self.progress.step)
            greedy = replace(self.cfg.decode, beam=1, nbest=1)  # fast, whatever decode.beam is
            hyps = Translator(run, greedy, device=self.device).translate(self.val_src)
            scores = score(hyps, self.val_ref)
            result.update(val_bleu=scores["bleu"], val_chrf=scores["chrf"])
        self.model.train()
        return result

    def _checkpoint(self) -> None:
        """Validate, save last (and best), and decide on early stopping."""
        t, p = self.cfg.train, self.progress
        result = self.validate()
        self.checkpointed_at, self.last_result = p.step, result
        stop = False
        if self.main:
            value = result["val_bleu"] if t.metric == "bleu" else result["val_loss"]
            better = p.best is None or (value > p.best if t.metric == "bleu" else value < p.best)
            if better:
                p.best, p.bad_evals = value, 0
                self._save(BEST, full=False)
            else:
                p.bad_evals += 1
            self._save(LAST, full=True)
            self._log({"event": "valid", "step": p.step, "epoch": p.epoch, **result,
                       "best": p.best})
            shown = " | ".join(f"{k} {v}" for k, v in result.items())
            log.info(f"step {p.step} | {shown}" + (" | new best" if better else ""))
            stop = t.patience > 0 and p.bad_evals >= t.patience
        if self.world > 1:
            flag = [stop]
            dist.broadcast_object_list(flag, src=0)
            stop = flag[0]
        if stop:
            self.stop_reason = "patience"
            raise Stop


def train(config: Path | None, overrides: list[str], out: Path | None, device: str,
          resume: bool) -> dict:
    """`mt train`: with --resume and no config, the run directory's saved config is used."""
    if config is None and not (resume and out is not None):
        raise ConfigError("a config file is required (or --out RUN --resume)")
    run_dir = Path(out) if out is not None else Path("runs") / Path(config).stem
    saved = run_dir / CONFIG
    cfg = load_config(config if config is not None else saved, overrides)
    if resume and config is not None and saved.exists():
        old = load_config(saved)
        if old.model != cfg.model or old.data != cfg.data:
            raise ConfigError(f"{config}: model/data settings differ from the run being "
                              f"resumed ({saved})")
    with contextlib.suppress(AttributeError):
        sys.stdout.reconfigure(line_buffering=True)
    return Trainer(cfg, run_dir, device, resume).fit()
