"""`mt train`: load and check the config, then run the Trainer."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from mt.checkpoint import CONFIG
from mt.config import load_config
from mt.errors import ConfigError
from mt.tokenizers import config_problems
from mt.train.loop import Trainer
from mt.train.metrics_log import require_tensorboard


def train(config: Path | None, overrides: list[str], out: Path | None, device: str,
          resume: bool) -> dict:
    """`mt train`: with --resume and no config, the run directory's saved config is used."""
    if config is None and not (resume and out is not None):
        raise ConfigError("a config file is required (or --out RUN --resume)")
    run_dir = Path(out) if out is not None else Path("runs") / Path(config).stem
    saved = run_dir / CONFIG
    cfg = load_config(config if config is not None else saved, overrides, [config_problems])
    if cfg.train.tensorboard:
        require_tensorboard()  # now, not after minutes of loading data
    if resume and config is not None and saved.exists():
        old = load_config(saved)
        if old.model != cfg.model or old.data != cfg.data:
            raise ConfigError(f"{config}: model/data settings differ from the run being "
                              f"resumed ({saved})")
    with contextlib.suppress(AttributeError):
        sys.stdout.reconfigure(line_buffering=True)
    return Trainer(cfg, run_dir, device, resume).fit()
