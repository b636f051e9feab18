"""Run directories and checkpoints: config and vocab as text, tensors via `weights_only` loading.

A run directory holds:
  config.yaml          the resolved config
  vocab.src.txt        one token a line (ids are line numbers)
  vocab.tgt.txt
  spm*.model           SentencePiece runs only: the tokenizer model(s) (mt.subword)
  starters.txt         an export's only: the sentence starters (a checkpoint holds its own)
  best.pt, last.pt     checkpoints; last.pt also carries optimizer, progress and RNG state
                       (torch.save's zip archive: every load checks its members' CRC-32s)
  ckpt.STEP.pt         weights at validation steps, the newest train.keep_checkpoints of them
  metrics.jsonl        one JSON object per log/validation event

Checkpoints are one-file (`run_state`): besides the weights and step they carry the resolved
config, both vocabularies, any tokenizer files and the sources' sentence starters
(mt.document.starters), as plain dicts, lists, strings and tensors, so a checkpoint moved
out of its run directory still loads. Older checkpoints hold weights and step only; `open_run`
then reads config and vocab from the run directory.

`open_run` is the one way to open a run (translate, eval, tokenize, info, export, and an export
directory for CTranslate2); `load_run` adds the model.
"""

from __future__ import annotations

import pickle
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mt.config import Config, config_from_dict, load_config, override
from mt.errors import CheckpointError, MTError
from mt.log import warn
from mt.model import Seq2Seq, make_model
from mt.textio import atomic_write
from mt.tokenizers import Tokenizer, load_tokenizers, tokenizer_files
from mt.vocab import Vocab

CONFIG, SRC_VOCAB, TGT_VOCAB, BEST, LAST = ("config.yaml", "vocab.src.txt", "vocab.tgt.txt",
                                             "best.pt", "last.pt")
STARTERS = "starters.txt"  # an export's sentence starters, one a line (a checkpoint holds its own)
FORMAT = 1  # one-file checkpoint layout (`run_state`); files without "format" are weights-only


def step_checkpoint_name(step: int) -> str:
    return f"ckpt.{step}.pt"


def step_checkpoints(run: Path) -> list[tuple[int, Path]]:
    """A run directory's ckpt.STEP.pt files as (step, path), oldest first."""
    found = []
    for path in Path(run).glob("ckpt.*.pt"):
        step = path.name.split(".")[1]
        if step.isdigit():
            found.append((int(step), path))
    return sorted(found)


def save_checkpoint(path: Path, state: dict) -> None:
    """torch.save's zip archive, with a CRC-32 for each member (which load_checkpoint checks)."""
    def write(tmp: str) -> None:
        # Through a Python file, so a full disk raises OSError rather than a bare RuntimeError.
        with open(tmp, "wb") as f:
            torch.save(state, f)

    atomic_write(path, write)


ZIP_MAGIC = b"PK\x03\x04"  # a zip archive starts with a member's local header
DOS_DIRECTORY = 0x10  # a member's external attribute bit that torch's zip reader heeds
CHUNK = 1 << 20  # bytes read at a time when checking CRCs: memory stays flat


def verify_archive(path: Path) -> None:
    """Read every member of the zip archive once, checking its CRC-32.

    torch.load does not check them, so without this a flipped byte in a tensor would load
    silently. Raises zipfile.BadZipFile (or another error of a malformed archive).
    """
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.external_attr & DOS_DIRECTORY:  # torch would read no bytes into its tensor
                raise zipfile.BadZipFile(f"{info.filename} is marked as a directory")
            with archive.open(info) as member:  # compares the CRC-32 once it reaches the end
                while member.read(CHUNK):
                    pass


def load_checkpoint(path: Path) -> dict:
    """Check the archive's CRC-32s, then load tensors and plain containers only:
    `weights_only=True` refuses any pickled code.

    Anything wrong with the file is a CheckpointError: not a checkpoint at all, truncated or
    corrupted (a CRC-32 that does not match), refused (it holds other Python objects), or not
    an mt checkpoint. An unreadable file (permissions) raises OSError.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found; give a run directory or a .pt "
                              "file written by mt train")
    damaged = f"{path}: truncated or corrupted checkpoint"
    advice = "; use another checkpoint, e.g. last.pt or best.pt"
    with open(path, "rb") as f:
        head = f.read(len(ZIP_MAGIC))
    if not ZIP_MAGIC.startswith(head):  # a plain pickle, text, ...: never unpickle it
        raise CheckpointError(f"{path}: not an mt checkpoint (not a PyTorch zip archive); "
                              "give a checkpoint written by mt train")
    try:
        verify_archive(path)
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
    except Exception as e:  # malformed input makes zipfile and torch.load raise many kinds
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        first = first.split(". ")[0]  # torch's messages run on for several sentences
        if not any(c.isalpha() for c in first):  # e.g. KeyError: 101
            first = f"{type(e).__name__} {first}"
        raise CheckpointError(f"{damaged} ({first}){advice}") from None
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        raise CheckpointError(f"{path}: not an mt checkpoint (no model weights); give a "
                              "checkpoint written by mt train")
    return state


def find_checkpoint(run: Path) -> Path:
    """A run directory's best checkpoint (else last), or the checkpoint file given."""
    run = Path(run)
    if run.is_dir():
        for name in (BEST, LAST):
            if (run / name).is_file():
                return run / name
        raise CheckpointError(f"{run}: no checkpoint (best.pt or last.pt) in this run "
                              "directory; train it first, or give a .pt file")
    if run.is_file():
        return run
    raise CheckpointError(f"{run}: no such run directory or checkpoint file; check the path")


def run_state(weights: dict[str, torch.Tensor], cfg: Config, src_vocab: Vocab, tgt_vocab: Vocab,
              step: int, files: dict[str, bytes] | None = None,
              starters: Sequence[str] = ()) -> dict:
    """A one-file checkpoint: everything needed to rebuild the model, as plain data.

    weights is a model state dict (e.g. `model.state_dict()`, or averaged weights). files are
    the tokenizer's files by name (say a SentencePiece model), kept as uint8 tensors because
    `weights_only` loading accepts tensors, not bytes. starters: the training sources' sentence
    starters (mt.document.starters). Add training state to the result (optimizer, progress,
    RNG) for a resumable checkpoint.
    """
    return {"format": FORMAT, "model": weights, "step": step, "config": cfg.to_dict(),
            "vocab": {"src": list(src_vocab.itos), "tgt": list(tgt_vocab.itos)},
            "files": {name: _as_tensor(data) for name, data in (files or {}).items()},
            "starters": list(starters)}


def _as_tensor(data: bytes) -> torch.Tensor:
    if not data:
        return torch.empty(0, dtype=torch.uint8)  # frombuffer refuses an empty buffer
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


@dataclass
class Run:
    """A run as opened from its checkpoint (or its directory): what translating needs."""

    cfg: Config
    model: Seq2Seq | None  # None from open_run, or for a CTranslate2 export (mt.ct2)
    src_vocab: Vocab
    tgt_vocab: Vocab
    step: int
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    files: dict[str, bytes] = field(default_factory=dict)  # the tokenizers' files, by name
    checkpoint: Path | None = None  # the file read; None: a directory's files alone
    format: int = 0  # FORMAT: a one-file checkpoint; 0: config and vocab from its directory
    lineage: dict | None = None  # how its weights were made (mt.train.lineage); None: unknown
    starters: list[str] = field(default_factory=list)  # its sources' (mt.document.starters)


def open_run(path: Path, overrides: Sequence[str] = ()) -> Run:
    """A run without its model: config, vocabularies, tokenizers and step.

    path is a run directory (its best.pt, else last.pt), a checkpoint file, or a directory
    that holds a run's files but no checkpoint (an `mt export`, a run before its first
    validation). Config and vocab come from the checkpoint if it carries them (one-file
    checkpoints), else from the directory's text files; overrides (`key=value`, as
    `mt train --set`) apply to the config before the tokenizers are loaded.
    """
    return _open(Path(path), overrides)[0]


def load_run(path: Path, device: torch.device | str = "cpu",
             overrides: Sequence[str] = ()) -> Run:
    """open_run of a checkpoint, and the model rebuilt from its config with its weights, on
    device in eval mode."""
    run, state = _open(find_checkpoint(Path(path)), overrides)
    run.model = make_model(run.cfg.model, len(run.src_vocab), len(run.tgt_vocab))
    load_weights(run.model, state, run.checkpoint)
    run.model.to(device).eval()
    return run


def _open(path: Path, overrides: Sequence[str]) -> tuple[Run, dict]:
    """The run (no model) and the checkpoint read ({} for a directory without one)."""
    ckpt, state = None, {}
    if not (path.is_dir() and (path / CONFIG).is_file() and not _has_checkpoint(path)):
        ckpt = find_checkpoint(path)
        state = load_checkpoint(ckpt)
    directory = path if ckpt is None else ckpt.parent
    one_file = "config" in state and "vocab" in state
    if one_file:
        cfg, src_vocab, tgt_vocab, files = _unpack(state, ckpt)
    else:
        cfg, src_vocab, tgt_vocab, files = *_read_directory(directory), {}
    if overrides:
        cfg = override(cfg, overrides, "command line")
    src_tok, tgt_tok = load_tokenizers(cfg.data, directory, files)
    for tok, vocab, name in ((src_tok, src_vocab, SRC_VOCAB), (tgt_tok, tgt_vocab, TGT_VOCAB)):
        # the model's pieces first; a run's tags, data.terminology's and data.memory's
        # tokens after them (mt.cached_mix.run_vocabs)
        if tok.fixed_vocab is not None and tok.fixed_vocab != vocab.itos[:len(tok.fixed_vocab)]:
            where = f"{ckpt}: its {name}" if one_file else directory / name
            raise CheckpointError(f"{where}: does not match the run's tokenizer model; use the "
                                  "files saved together with this run")
    for name in tokenizer_files(cfg.data):  # those the checkpoint lacks: its directory's
        if name not in files:
            files[name] = (directory / name).read_bytes()
    starters = state.get("starters", [])
    if ckpt is None and (directory / STARTERS).is_file():  # an export's
        starters = (directory / STARTERS).read_text(encoding="utf-8").splitlines()
    if not (isinstance(starters, list) and all(isinstance(s, str) for s in starters)):
        raise CheckpointError(f"{ckpt}: damaged one-file checkpoint (its starters are "
                              f"{type(starters).__name__}, not a list of strings)")
    run = Run(cfg, None, src_vocab, tgt_vocab, int(state.get("step", 0)), src_tok, tgt_tok,
              files, ckpt, state["format"] if one_file else 0, state.get("lineage"), starters)
    return run, state


def _has_checkpoint(directory: Path) -> bool:
    return any((directory / name).is_file() for name in (BEST, LAST))


def _read_directory(directory: Path) -> tuple[Config, Vocab, Vocab]:
    """Config and vocabularies from a directory's text files (a run's, or an export's)."""
    if not (directory / CONFIG).is_file():
        raise CheckpointError(f"{directory / CONFIG}: config missing from the run directory; "
                              "copy it from the run the checkpoint came from (with the "
                              "vocab files)")
    cfg = load_config(directory / CONFIG)
    if "tokenizer:" not in (directory / CONFIG).read_text(encoding="utf-8"):
        # Saved configs hold every key: this run is older than data.tokenizer, its
        # vocabulary has no joiner marks (docs/tokenization.md).
        warn(f"{directory}: trained before reversible tokenization; its translations lose "
             "punctuation; evaluate it with the mt version that trained it, or train again")
    return cfg, Vocab.load(directory / SRC_VOCAB), Vocab.load(directory / TGT_VOCAB)


def _unpack(state: dict, where: Path) -> tuple[Config, Vocab, Vocab, dict[str, bytes]]:
    """Config, vocabularies and files of a one-file checkpoint; CheckpointError if malformed."""
    version = state.get("format")
    if not isinstance(version, int) or version > FORMAT:
        raise CheckpointError(f"{where}: checkpoint format {version!r} is not one this version "
                              f"of mt reads (up to {FORMAT}); upgrade mt")
    vocab, files = state["vocab"], state.get("files", {})
    try:
        cfg = config_from_dict(state["config"], f"{where} (its config)")
        src, tgt = Vocab(vocab["src"]), Vocab(vocab["tgt"])
        files = {name: t.numpy().tobytes() for name, t in files.items()}
    except MTError as e:
        raise CheckpointError(f"{where}: damaged one-file checkpoint: {e}") from None
    except (TypeError, KeyError, AttributeError) as e:
        raise CheckpointError(f"{where}: damaged one-file checkpoint ({e!r})") from None
    return cfg, src, tgt, files


def load_weights(model: torch.nn.Module, state: dict, where: Path) -> None:
    """Copy weights in; one-line error when shapes or names disagree with the config/vocab."""
    weights = state["model"]
    own = model.state_dict()
    missing = sorted(set(own) - set(weights))
    unexpected = sorted(set(weights) - set(own))
    if missing or unexpected:
        raise CheckpointError(
            f"{where}: checkpoint does not match the run's config "
            f"(missing {missing[:3]}, unexpected {unexpected[:3]}); use the config.yaml "
            "saved with this checkpoint")
    for name, tensor in own.items():
        if not isinstance(weights[name], torch.Tensor) or weights[name].shape != tensor.shape:
            w = weights[name]
            got = tuple(w.shape) if isinstance(w, torch.Tensor) else type(w).__name__
            raise CheckpointError(
                f"{where}: checkpoint does not match the run's config/vocabulary: "
                f"{name} is {got} in the file, {tuple(tensor.shape)} expected; were config.yaml "
                "or the vocab files changed? Use the ones saved with this checkpoint")
    model.load_state_dict(weights)
