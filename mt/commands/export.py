"""`mt export RUN --to ctranslate2|hf OUT`: the export directory, written whole or not at all."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from mt.checkpoint import find_checkpoint, load_run
from mt.errors import FileSystemError, RunError, UsageError, os_error_message

EXPORT_FORMATS = ("ctranslate2", "hf")  # `mt export --to`


def export(run_path: Path, out: Path, to: str = "ctranslate2", quantization: str | None = None,
           force: bool = False) -> dict:
    """`mt export RUN --to FORMAT OUT`: ctranslate2 (quantization: None for float32, or one of
    mt.ct2.export.QUANTIZATIONS that this machine runs), or hf (a Marian model directory for
    transformers, mt.hf.export)."""
    out = Path(out)
    if to == "ctranslate2":
        from mt.ct2.export import check_quantization, require_ctranslate2, write_model
        require_ctranslate2()
        check_quantization(quantization)
    else:
        from mt.hf.export import write_export
        if quantization:
            raise UsageError("export", "'--quantization'", "only for --to ctranslate2 (a "
                             "Hugging Face export keeps float32 weights)")
    check_out(out, force)
    ckpt = find_checkpoint(Path(run_path))
    if ckpt.parent.resolve().is_relative_to(out.resolve()):
        raise RunError(f"{out}: holds the run being exported; give another directory")
    run = load_run(ckpt)
    if to == "ctranslate2":
        write_directory(out, lambda tmp: write_model(run, tmp, quantization))
    else:
        write_directory(out, lambda tmp: write_export(run, tmp))
    return {"out": str(out), "checkpoint": str(ckpt), "step": run.step, "to": to,
            "quantization": quantization or "float32"}


def check_out(out: Path, force: bool) -> None:
    """OUT may be made (or, with force, replaced): RunError if not."""
    if out.exists() and not force:
        raise RunError(f"{out}: already exists; use --force to replace it")
    if out.exists() and not out.is_dir():
        raise RunError(f"{out}: is a file; give a directory name")


def write_directory(out: Path, write: Callable[[Path], None]) -> None:
    """Build a directory with write(tmp) in a temporary directory beside out, then rename it
    into place: out is either the old directory or the complete new one."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    except OSError as e:
        raise FileSystemError(os_error_message(e, out)) from None
    old = out.parent / f"{tmp.name}.old"
    try:
        write(tmp)
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; give the usual permissions
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
    except OSError as e:
        raise FileSystemError(os_error_message(e, out)) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
