"""`mt train`: load and check the config, then run the Trainer."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from mt.checkpoint import CONFIG
from mt.config import blamer, load_config
from mt.errors import ConfigError
from mt.tokenizers import config_problems
from mt.train.loop import Trainer
from mt.train.metrics_log import require_tensorboard
from mt.train.state import resume_changes


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
    if resume and saved.exists():  # the same check for a config file and for --set
        old = load_config(saved)
        if changed := resume_changes(old, cfg):
            key = changed[0]
            section, name = key.split(".")
            now, was = (getattr(getattr(c, section), name) for c in (cfg, old))
            raise ConfigError(f"{blamer(str(config or saved), overrides)(key)}: {key} differs "
                              f"from the run being resumed ({now!r}, was {was!r} in {saved}); "
                              "a resume cannot change it: drop the change, or start a new run "
                              "with another --out to train with it")
    with contextlib.suppress(AttributeError):
        sys.stdout.reconfigure(line_buffering=True)
    return Trainer(cfg, run_dir, device, resume).fit()
