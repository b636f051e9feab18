"""The run directory: its checks, made before any data is loaded, its lock, and the text files
of a new run (config and vocabularies), and which step checkpoints it keeps."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import TextIO

from mt import log
from mt.checkpoint import BEST, CONFIG, LAST, SRC_VOCAB, TGT_VOCAB, step_checkpoints
from mt.config import Config
from mt.errors import RunError
from mt.vocab import Vocab

MIN_FREE = 50 * 2**20  # bytes free on disk below which a run does not start


def claim_run_dir(run_dir: Path, resume: bool) -> TextIO:
    """Create or check `run_dir` for a new run (or a resumed one) and lock it; returns the
    lock's open file, which holds the lock while it stays open."""
    if run_dir.exists() and not run_dir.is_dir():
        raise RunError(f"{run_dir}: exists and is not a directory; choose another --out")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RunError(f"{run_dir}: cannot create the run directory ({e.strerror}); "
                       "choose another --out") from None
    if not os.access(run_dir, os.W_OK):
        raise RunError(f"{run_dir}: run directory is not writable; choose another --out")
    # An flock dies with its process, so a crashed run never leaves a stale lock behind.
    # Append mode: opening it changes nothing in a run that is then refused.
    lock = open(run_dir / ".lock", "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise RunError(f"{run_dir}: another training run is using this directory; wait for it "
                       "to finish or choose another --out") from None
    # Only a checkpoint makes a run worth keeping: one stopped before its first save starts
    # afresh (its config and vocab are rewritten).
    if (run_dir / LAST).exists() and not resume:
        raise RunError(f"{run_dir}: holds a run already; add --resume to continue it, or "
                       "choose another --out")
    if resume and not (run_dir / LAST).exists():
        raise RunError(f"{run_dir}: nothing to resume (no {LAST}: the run stopped before its "
                       "first checkpoint); run again without --resume")
    free = shutil.disk_usage(run_dir).free
    if free < MIN_FREE:
        raise RunError(f"{run_dir}: only {free // 2**20} MiB free on disk; free some space or "
                       "choose another --out")
    # A checkpoint save cut short by kill -9 leaves its temporary file (see atomic_write);
    # holding the lock, this run is the only one that could still be writing them.
    for name in (BEST, LAST):
        for tmp in run_dir.glob(f".{name}.*.tmp"):
            tmp.unlink(missing_ok=True)
            log.info(f"removed {tmp}, left by an interrupted save")
    return lock


def write_run_files(run_dir: Path, cfg: Config, src_vocab: Vocab, tgt_vocab: Vocab) -> None:
    """What --resume, `mt eval` and `mt translate` read besides a checkpoint."""
    cfg.save(run_dir / CONFIG)
    src_vocab.save(run_dir / SRC_VOCAB)
    tgt_vocab.save(run_dir / TGT_VOCAB)


def prune_step_checkpoints(run_dir: Path, keep: int) -> None:
    """Keep the newest `keep` ckpt.STEP.pt (for `mt average`); called once the newest is
    complete, so that a save cut short never leaves fewer."""
    for _, path in step_checkpoints(run_dir)[:-keep]:
        path.unlink(missing_ok=True)
