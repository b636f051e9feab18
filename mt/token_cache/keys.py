"""What names a token cache entry: the cache's root, and the settings and files hashed into
the entry's name (so a change to either makes another entry)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from mt.config import DataConfig
from mt.tokenizers import FLAT_KEYS, TokenizerSettings, tokenizer_kind

FORMAT = 2  # bump when the layout or the way ids are made changes: old entries are then unused


def cache_root() -> Path:
    """$MT_CACHE_DIR, else $XDG_CACHE_HOME/mt, else ~/.cache/mt."""
    if os.environ.get("MT_CACHE_DIR"):
        return Path(os.environ["MT_CACHE_DIR"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mt"


def entry_settings(d: DataConfig, tok_files: Mapping[str, bytes]) -> dict:
    """Everything that changes a corpus's ids: every data setting but the files (the files hash
    covers those), max_len (applied when the arrays are loaded), the vocabulary's size
    (applied to the counts) and data.memory, and the tokenizer's files."""
    kept = {}
    for k, v in asdict(d).items():
        if k == "tokenizer":
            kept.update(_tokenizer_key(d.tokenizer))
        # data.memory's matches are cached on their own (mt.token_cache.matches): not the ids
        elif k not in ("dir", "train", "val", "test", "max_len", "min_freq", "max_size",
                       "memory"):
            kept[k] = v
    # The tokenizer library's version too: its rules (or its trainer) may change the tokens.
    return {"format": FORMAT, "data": kept, **tokenizer_kind(d.tokenizer.kind).cache_settings(),
            "tokenizer_files": dict(digests(tok_files))}


def _tokenizer_key(s: TokenizerSettings) -> dict:
    """The tokenizer settings as the key spelled them before they moved into data.tokenizer:
    the kind's name, then the old flat keys (FLAT_KEYS), another kind's at their old defaults;
    so the entries built before stay valid. A kind without flat keys adds its settings."""
    fields = asdict(s)
    key = {"tokenizer": fields.pop("kind")}
    for flat, (kind, name, default) in FLAT_KEYS.items():
        key[flat] = fields.pop(name) if kind == s.kind else default
    return {**key, "tokenizer_settings": fields} if fields else key


def trained_tokenizer_settings(d: DataConfig) -> dict:
    """What a trained tokenizer's entry depends on: entry_settings, but not the filter, nor how
    the cache samples segmentations (its kind's SAMPLING settings)."""
    settings = entry_settings(d, {})
    trained_on = settings["data"]
    trained_on.pop("filter")
    for flat, (kind, name, _) in FLAT_KEYS.items():
        if kind == d.tokenizer.kind and name in d.tokenizer.SAMPLING:
            trained_on.pop(flat)
    for name in d.tokenizer.SAMPLING:
        trained_on.get("tokenizer_settings", {}).pop(name, None)
    return settings


def digests(files: Mapping[str, bytes]) -> list[tuple[str, str]]:
    return [(n, hashlib.sha256(b).hexdigest()) for n, b in files.items()]


def short_hash(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]
