"""The run directory: its checks, made before any data is loaded, its lock, the files of a new
run (config, vocabularies, tokenizers), what a run that fails while setting up takes back, and
which step checkpoints it keeps."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from mt import log
from mt.checkpoint import BEST, CONFIG, LAST, SRC_VOCAB, TGT_VOCAB, step_checkpoints
from mt.config import Config
from mt.errors import RunError
from mt.vocab import Vocab

MIN_FREE = 50 * 2**20  # bytes free on disk below which a run does not start


class Claim:
    """A run directory this run has locked, and what this run created there, in order: the
    directories (--out and any missing parents), the lock file, the run files: what `undo`
    may remove, and nothing else."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.made = [d for d in reversed((run_dir, *run_dir.parents)) if not d.exists()]
        self.lock: TextIO | None = None  # holds the lock while it stays open

    def write(self, name: str, write: Callable[[Path], object]) -> None:
        """write(path) for a file of the run; recorded for `undo` unless it was there before
        (a file this run overwrote is not removed)."""
        path = self.run_dir / name
        if not path.exists():
            self.made.append(path)
        write(path)

    def undo(self) -> None:
        """Remove what this run created, newest first, then let go of the lock: a run that
        fails while setting up leaves the disk as it found it. Files go while the lock is
        still held (a refused second run never gets here: see _lock); a directory goes only
        if empty, so one something else was put in meanwhile stays."""
        for path in reversed(self.made):
            with contextlib.suppress(OSError):
                path.rmdir() if path.is_dir() else path.unlink()
        if self.lock is not None:
            self.lock.close()


def claim_run_dir(run_dir: Path, resume: bool) -> Claim:
    """Create or check `run_dir` for a new run (or a resumed one) and lock it; a refusal
    leaves nothing of this run behind."""
    if run_dir.exists() and not run_dir.is_dir():
        raise RunError(f"{run_dir}: exists and is not a directory; choose another --out")
    claim = Claim(run_dir)
    try:
        _lock(claim)
        _check(run_dir, resume)
    except BaseException:
        claim.undo()
        raise
    return claim


def _lock(claim: Claim) -> None:
    run_dir = claim.run_dir
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RunError(f"{run_dir}: cannot create the run directory ({e.strerror}); "
                       "choose another --out") from None
    if not os.access(run_dir, os.W_OK):
        raise RunError(f"{run_dir}: run directory is not writable; choose another --out")
    path = run_dir / ".lock"
    if not path.exists():
        claim.made.append(path)
    # An flock dies with its process, so a crashed run never leaves a stale lock behind.
    # Append mode: opening it changes nothing in a run that is then refused.
    claim.lock = open(path, "a")
    try:
        fcntl.flock(claim.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        claim.made.clear()  # the directory is the other run's: nothing there is ours to undo
        raise RunError(f"{run_dir}: another training run is using this directory; wait for it "
                       "to finish or choose another --out") from None


def _check(run_dir: Path, resume: bool) -> None:
    """What the locked directory must hold (or not) for this run to start in it."""
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


def write_run_files(claim: Claim, cfg: Config, src_vocab: Vocab, tgt_vocab: Vocab,
                    tok_files: dict[str, bytes]) -> None:
    """What --resume, `mt eval` and `mt translate` read besides a checkpoint: the config, the
    vocabularies and the tokenizers' files (e.g. a SentencePiece model)."""
    claim.write(CONFIG, cfg.save)
    claim.write(SRC_VOCAB, src_vocab.save)
    claim.write(TGT_VOCAB, tgt_vocab.save)
    for name, data in tok_files.items():
        claim.write(name, lambda path, data=data: path.write_bytes(data))


def prune_step_checkpoints(run_dir: Path, keep: int) -> None:
    """Keep the newest `keep` ckpt.STEP.pt (for `mt average`); called once the newest is
    complete, so that a save cut short never leaves fewer."""
    for _, path in step_checkpoints(run_dir)[:-keep]:
        path.unlink(missing_ok=True)
