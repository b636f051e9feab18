"""`mt prepare`: build the training corpora's token cache ahead of training."""

from __future__ import annotations

from pathlib import Path

from mt.cached_mix import check_tags, corpus_tags
from mt.config import load_config
from mt.token_cache import CachedCorpora, open_cached_corpora
from mt.tokenizers import config_problems


def prepare(config: Path, overrides: list[str], workers: int = 0) -> CachedCorpora:
    """`mt prepare`: build the token cache of each training corpus (and train the tokenizer,
    if it needs training) ahead of training."""
    cfg = load_config(config, overrides, [config_problems])
    cached = open_cached_corpora(cfg.data, workers=workers)
    check_tags(cached, corpus_tags(cached))  # a tag the data holds: refused now, not in training
    return cached
