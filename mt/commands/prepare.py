"""`mt prepare`: build the training split's token cache ahead of training."""

from __future__ import annotations

from pathlib import Path

from mt.config import load_config
from mt.token_cache import TokenCache, open_cache
from mt.tokenizers import config_problems


def prepare(config: Path, overrides: list[str], workers: int = 0) -> TokenCache:
    """`mt prepare`: build the training split's token cache ahead of training."""
    return open_cache(load_config(config, overrides, [config_problems]).data, workers=workers)
