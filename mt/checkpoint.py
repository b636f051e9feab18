"""Run directories and checkpoints: config and vocab as text, tensors via `weights_only` loading.

A run directory holds:
  config.yaml          the resolved config
  vocab.src.txt        one token a line (ids are line numbers)
  vocab.tgt.txt
  spm*.model           SentencePiece runs only: the tokenizer model(s) (mt.subword)
  best.pt, last.pt     checkpoints; last.pt also carries optimizer, progress and RNG state
  metrics.jsonl        one JSON object per log/validation event
"""

from __future__ import annotations

import os
import pickle
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

from mt.config import Config, load_config
from mt.errors import CheckpointError, FileSystemError, os_error_message
from mt.log import warn
from mt.model import Seq2Seq, make_model
from mt.tokenizer import Tokenizer, load_tokenizers
from mt.vocab import PAD, Vocab

CONFIG, SRC_VOCAB, TGT_VOCAB, BEST, LAST = ("config.yaml", "vocab.src.txt", "vocab.tgt.txt",
                                             "best.pt", "last.pt")


def atomic_write(path: Path, write) -> None:
    """Call write(tmp_path), then rename over path: a crash never leaves a partial file there.

    The old file at path stays as it was until the new one is complete; on any failure the
    temporary file is removed. OS errors (permissions, a full disk) become FileSystemError
    naming path.
    """
    path = Path(path)
    if path.is_dir():
        raise FileSystemError(f"{path}: is a directory; give a file name")
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise FileSystemError(os_error_message(e, path)) from None
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual permissions
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise FileSystemError(os_error_message(e, path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(path: Path, state: dict) -> None:
    def write(tmp: str) -> None:
        # Through a Python file, so a full disk raises OSError rather than a bare RuntimeError.
        with open(tmp, "wb") as f:
            torch.save(state, f)

    atomic_write(path, write)


def load_checkpoint(path: Path) -> dict:
    """Load tensors and plain containers only: `weights_only=True` refuses any pickled code.

    Anything wrong with the file is a CheckpointError: refused (it holds other Python objects),
    truncated or corrupted, or not an mt checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    damaged = f"{path}: truncated or corrupted checkpoint"
    advice = "; use another checkpoint, e.g. last.pt or best.pt"
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; never unpickle others
        raise CheckpointError(f"{damaged}, or not one written by mt (not a PyTorch zip "
                              f"archive){advice}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        found = [line.strip() for line in str(e).splitlines() if "GLOBAL" in line.upper()]
        if not found:
            raise CheckpointError(f"{damaged} (its pickled data is malformed){advice}") from None
        # torch's own message suggests weights_only=False, which would run the file's code.
        raise CheckpointError(
            f"{path}: refused to load: the file holds Python objects, not just tensors "
            f"({found[0]}); only load checkpoints written by mt from a source you trust"
        ) from None
    except Exception as e:  # malformed input makes torch.load raise many kinds of error
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        first = first.split(". ")[0]  # torch's messages run on for several sentences
        if not any(c.isalpha() for c in first):  # e.g. KeyError: 101
            first = f"{type(e).__name__} {first}"
        raise CheckpointError(f"{damaged} ({first}){advice}") from None
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        raise CheckpointError(f"{path}: not an mt checkpoint (no model weights)")
    return state


def find_checkpoint(run: Path) -> Path:
    """A run directory's best checkpoint (else last), or the checkpoint file given."""
    run = Path(run)
    if run.is_dir():
        for name in (BEST, LAST):
            if (run / name).is_file():
                return run / name
        raise CheckpointError(f"{run}: no checkpoint (best.pt or last.pt) in this run directory")
    if run.is_file():
        return run
    raise CheckpointError(f"{run}: no such run directory or checkpoint file")


@dataclass
class Run:
    cfg: Config
    model: Seq2Seq
    src_vocab: Vocab
    tgt_vocab: Vocab
    step: int
    src_tok: Tokenizer
    tgt_tok: Tokenizer


def load_run(run: Path, device: torch.device | str = "cpu") -> Run:
    """Rebuild the model from a run directory's text config and vocab, then load its weights."""
    ckpt = find_checkpoint(Path(run))
    run_dir = ckpt.parent
    if not (run_dir / CONFIG).is_file():
        raise CheckpointError(f"{run_dir / CONFIG}: config missing from the run directory (a "
                              "checkpoint needs the config.yaml and vocab files saved beside it)")
    cfg = load_config(run_dir / CONFIG)
    if "tokenizer:" not in (run_dir / CONFIG).read_text(encoding="utf-8"):
        # Saved configs hold every key: this run is older than data.tokenizer, its vocabulary
        # has no joiner marks (README, Tokenization).
        warn(f"{run_dir}: trained before reversible tokenization; its translations lose "
             "punctuation; evaluate it with the mt version that trained it, or train again")
    src_vocab, tgt_vocab = Vocab.load(run_dir / SRC_VOCAB), Vocab.load(run_dir / TGT_VOCAB)
    src_tok, tgt_tok = load_tokenizers(cfg.data, run_dir)
    for tok, vocab, name in ((src_tok, src_vocab, SRC_VOCAB), (tgt_tok, tgt_vocab, TGT_VOCAB)):
        if tok.fixed_vocab is not None and tok.fixed_vocab != vocab.itos:
            raise CheckpointError(f"{run_dir / name}: does not match the run's tokenizer model; "
                                  "use the files saved together with this run")
    state = load_checkpoint(ckpt)
    model = make_model(cfg.model, len(src_vocab), len(tgt_vocab), PAD)
    load_weights(model, state, ckpt)
    model.to(device).eval()
    return Run(cfg, model, src_vocab, tgt_vocab, int(state.get("step", 0)), src_tok, tgt_tok)


def load_weights(model: torch.nn.Module, state: dict, where: Path) -> None:
    """Copy weights in; one-line error when shapes or names disagree with the config/vocab."""
    weights = state["model"]
    own = model.state_dict()
    missing = sorted(set(own) - set(weights))
    unexpected = sorted(set(weights) - set(own))
    if missing or unexpected:
        raise CheckpointError(
            f"{where}: checkpoint does not match the run's config "
            f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    for name, tensor in own.items():
        if not isinstance(weights[name], torch.Tensor) or weights[name].shape != tensor.shape:
            w = weights[name]
            got = tuple(w.shape) if isinstance(w, torch.Tensor) else type(w).__name__
            raise CheckpointError(
                f"{where}: checkpoint does not match the run's config/vocabulary: "
                f"{name} is {got} in the file, {tuple(tensor.shape)} expected; were config.yaml "
                "or the vocab files changed? Use the ones saved with this checkpoint")
    model.load_state_dict(weights)
