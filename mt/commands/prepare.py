"""`mt prepare`: build the training corpora's token cache ahead of training."""

from __future__ import annotations

from pathlib import Path

from mt.config import load_config
from mt.token_cache import Corpora, open_corpora
from mt.tokenizers import config_problems


def prepare(config: Path, overrides: list[str], workers: int = 0) -> Corpora:
    """`mt prepare`: build the token cache of each training corpus (and train the tokenizer,
    if it needs training) ahead of training."""
    cfg = load_config(config, overrides, [config_problems])
    corpora = open_corpora(cfg.data, workers=workers)
    corpora.vocabs()  # a tag the data holds is refused now, not when training starts
    return corpora
