"""`mt train`: load and check the config (and a fine-tuned run's parent), then run the
Trainer."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

from mt.checkpoint import CONFIG
from mt.config import ALIASES, blamer, load_config, override, override_value
from mt.errors import ConfigError
from mt.tokenizers import config_problems
from mt.train.finetune import child_config, open_parent
from mt.train.loop import Trainer
from mt.train.metrics_log import require_tensorboard
from mt.train.state import resume_changes


def train(config: Path | None, overrides: list[str], out: Path | None, device: str,
          resume: bool, init_from: Path | None = None) -> dict:
    """`mt train`: with --resume and no config, the run directory's saved config is used.
    init_from: fine-tune from this run or checkpoint (mt.train.finetune)."""
    if init_from is not None and resume:
        raise ConfigError("--init-from starts a new run from a parent's weights, --resume "
                          "continues a run: give one of them")
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
            instead = ("start a new run with another --out to train with it"
                       if section == "model" else
                       f"start a new run from this one's weights with it: --init-from "
                       f"{run_dir} --out NEW")
            raise ConfigError(f"{blamer(str(config or saved), overrides)(key)}: {key} differs "
                              f"from the run being resumed ({now!r}, was {was!r} in {saved}); "
                              f"a resume cannot change it: drop the change, or {instead}")
    parent = None
    if init_from is not None:  # before the run directory is made: a refusal leaves nothing
        parent = open_parent(init_from)
        given = given_keys(config, overrides)
        cfg = child_config(cfg, parent, blamer(str(config), overrides), given,
                           own_model=any(k.split(".")[0] == "model" for k in given))
        cfg = override(cfg, (), f"{config} with the parent's settings")  # checked together
    with contextlib.suppress(AttributeError):
        sys.stdout.reconfigure(line_buffering=True)
    return Trainer(cfg, run_dir, device, resume, parent).fit()


def given_keys(config: Path | None, overrides: list[str]) -> set[str]:
    """Every key the config file or a --set names, dotted, its sections included (data,
    data.tokenizer, data.tokenizer.kind, ...; the old flat data.vocab_size also as
    data.tokenizer.vocab_size): what a message may say the config sets."""
    def walk(key: str, node: object) -> Iterator[str]:
        yield key
        if key == "data.tokenizer" and isinstance(node, str):  # a kind's name
            yield f"{key}.kind"
        for k, v in (node.items() if isinstance(node, dict) else ()):
            yield from walk(f"{key}.{k}", v)

    raw = yaml.safe_load(Path(config).read_text(encoding="utf-8")) if config else None
    keys = {k for name, node in (raw.items() if isinstance(raw, dict) else ())
            for k in walk(str(name), node)}
    for item in overrides:  # load_config has checked them
        key, _, value = item.partition("=")
        keys.update(walk(key.strip(), override_value(value)))
    return keys | {ALIASES[k] for k in keys if k in ALIASES}
