"""Fine-tuning, `mt train CONFIG --init-from PARENT`: a new run that starts from a parent
checkpoint's weights, vocabularies and tokenizer files.

Nothing else of the parent is kept: the optimizer's moments, the learning-rate schedule (warmup
again from step 0), the step counter, the best score and the data position all start afresh,
as in a new run. The model section must be the parent's; the settings that decide the tokens
and their ids (INHERITED) are taken from the parent whatever the config says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

import torch

from mt import log
from mt.checkpoint import find_checkpoint, load_run
from mt.config import Config, ModelConfig
from mt.errors import ConfigError
from mt.tokenizers import TokenizerSettings
from mt.train.lineage import record
from mt.train.run_data import Inherited

# data settings that decide the tokenizers and vocabularies: the parent's are the child's; and
# data.tokenizer's, but for those that only sample segmentations (parent_tokenizer)
INHERITED = ("src_lang", "tgt_lang", "lowercase", "shared_vocab", "min_freq", "max_size")


@dataclass
class Parent:
    """The checkpoint a fine-tuned run starts from."""

    checkpoint: Path
    cfg: Config
    weights: dict[str, torch.Tensor]
    inherited: Inherited  # its vocabularies and tokenizer files
    record: dict  # what the child's lineage records of it (mt.train.lineage.record)


def open_parent(path: Path) -> Parent:
    """A run directory's best checkpoint (else last.pt), or a checkpoint file; a missing,
    damaged or foreign one is a CheckpointError."""
    ckpt = find_checkpoint(Path(path))
    run = load_run(ckpt)
    return Parent(ckpt, run.cfg, run.model.state_dict(),
                  Inherited(run.src_vocab, run.tgt_vocab, run.files),
                  record(ckpt, step=run.step, lineage=run.lineage))


def child_config(cfg: Config, parent: Parent, blame: Callable[[str], str],
                 given: Collection[str] = (), own_model: bool = True) -> Config:
    """cfg with the parent's INHERITED data settings (a log line for each the config gave
    otherwise: given, the keys the config file or a --set names; a default the config never
    mentions is taken silently); a ConfigError, blamed on who gave it, for the first model key
    that differs. Without own_model (the config gives no model section), the model section is
    the parent's."""
    if not own_model:
        log.info(f"model: the parent's ({parent.checkpoint}), as the config gives none")
        cfg = dataclasses.replace(cfg, model=parent.cfg.model)
    for f in dataclasses.fields(ModelConfig):
        mine, theirs = getattr(cfg.model, f.name), getattr(parent.cfg.model, f.name)
        if mine != theirs:
            key = f"model.{f.name}"
            raise ConfigError(f"{blame(key)}: {key} differs from the parent's ({mine!r} here, "
                              f"{theirs!r} in {parent.checkpoint}); a fine-tuned model is the "
                              "parent's: give its model section (mt info shows it), or train "
                              "a new model without --init-from")
    taken = {}
    for key in INHERITED:
        mine, theirs = getattr(cfg.data, key), getattr(parent.cfg.data, key)
        if mine != theirs:
            taken[key] = theirs
            if f"data.{key}" in given:
                _say_taken(f"data.{key}", mine, theirs)
    tokenizer = parent_tokenizer(parent.cfg.data.tokenizer, cfg.data.tokenizer)
    if tokenizer != cfg.data.tokenizer:
        taken["tokenizer"] = tokenizer
        mine = dataclasses.asdict(cfg.data.tokenizer)
        for key, theirs in dataclasses.asdict(tokenizer).items():
            if mine.get(key) != theirs and f"data.tokenizer.{key}" in given:
                _say_taken(f"data.tokenizer.{key}", mine.get(key), theirs)
            if key == "kind" and mine[key] != theirs:
                break  # another kind: its settings are all the parent's
    return dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, **taken))


def parent_tokenizer(parent: TokenizerSettings, own: TokenizerSettings) -> TokenizerSettings:
    """The parent's tokenizer settings; but those that only sample segmentations of the
    training text (its kind's SAMPLING) are the run's own, or their defaults when the run's
    config names another kind."""
    own = own if type(own) is type(parent) else type(parent)()
    return dataclasses.replace(parent, **{name: getattr(own, name) for name in parent.SAMPLING})


def _say_taken(key: str, mine: object, theirs: object) -> None:
    log.info(f"{key}: {theirs!r}, the parent's (the config says {mine!r}): a fine-tuned run "
             "keeps its parent's tokenizer and vocabulary")
