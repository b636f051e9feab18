"""`mt export RUN --to ctranslate2 OUT`: the export directory, written whole or not at all."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from mt.checkpoint import find_checkpoint, load_run
from mt.ct2.export import check_quantization, require_ctranslate2, write_model
from mt.errors import FileSystemError, RunError, os_error_message

FORMATS = ("ctranslate2",)  # `mt export --to`


def export(run_path: Path, out: Path, quantization: str | None = None,
           force: bool = False) -> dict:
    """`mt export RUN --to ctranslate2 OUT`: build in a temporary directory beside OUT, then
    rename it into place, so OUT is either the old export or the complete new one.

    quantization: None (float32) or one of mt.ct2.export.QUANTIZATIONS that this machine runs.
    """
    out = Path(out)
    require_ctranslate2()
    check_quantization(quantization)
    if out.exists() and not force:
        raise RunError(f"{out}: already exists; use --force to replace it")
    if out.exists() and not out.is_dir():
        raise RunError(f"{out}: is a file; give a directory name for the export")
    ckpt = find_checkpoint(Path(run_path))
    if ckpt.parent.resolve().is_relative_to(out.resolve()):
        raise RunError(f"{out}: holds the run being exported; give another directory")
    run = load_run(ckpt)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    except OSError as e:
        raise FileSystemError(os_error_message(e, out)) from None
    old = out.parent / f"{tmp.name}.old"
    try:
        write_model(run, tmp, quantization)
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; give the usual permissions
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
    except OSError as e:
        raise FileSystemError(os_error_message(e, out)) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return {"out": str(out), "checkpoint": str(ckpt), "step": run.step,
            "quantization": quantization or "float32"}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
