"""Opening the runs a command names: one run (a directory, a checkpoint file or an export),
or several as an ensemble (mt.ensemble), checked that their models can be averaged token by
token: the same tokenizers and vocabularies."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from mt.checkpoint import Run, open_run
from mt.errors import ConfigError

# What the models of an ensemble must share (beside their vocabularies and tokenizer files):
# the settings that make their tokenizers.
SHARED_DATA_KEYS = ("tokenizer", "src_lang", "tgt_lang", "lowercase")
Paths = str | Path | Sequence[str | Path]  # one run (or export), or the runs of an ensemble


def as_paths(path: Paths) -> list[Path]:
    return [Path(path)] if isinstance(path, str | Path) else [Path(p) for p in path]


def open_runs(path: Paths, overrides: Sequence[str] = ()) -> list[Run]:
    """open_run of each path (no model), checked as an ensemble's when there are several."""
    paths = as_paths(path)
    refuse_exports(paths)
    runs = [open_run(p, overrides) for p in paths]
    check_ensemble(runs, paths)
    return runs


def refuse_exports(paths: Sequence[Path]) -> None:
    """A ConfigError for a CTranslate2 export among an ensemble's paths."""
    if len(paths) < 2:
        return
    from mt.ct2.search import is_export  # ct2 is an extra: imported only when needed

    for p in paths:
        if is_export(p):
            raise ConfigError(f"{p}: a CTranslate2 export cannot be part of an ensemble (mt's "
                              "own search decodes ensembles); give the run it was exported from")


def check_ensemble(runs: Sequence[Run], paths: Sequence[Path]) -> None:
    """A ConfigError naming the first difference an ensemble cannot have between a run and the
    first: one source tensor feeds every model and their log-probabilities are averaged token
    by token, so tokenizers and both vocabularies must be the same."""
    first = runs[0]
    for run, path in zip(runs[1:], paths[1:], strict=True):
        what = _first_difference(first, run)
        if what:
            raise ConfigError(f"{path}: cannot be ensembled with {paths[0]}: {what}; the "
                              "models of an ensemble share their tokenizers and vocabularies")


def _shared_settings(run: Run) -> list[tuple[str, object]]:
    """The (key, value) pairs of SHARED_DATA_KEYS, the tokenizer's kind and each of its
    settings apart; how a kind samples segmentations in training (SAMPLING) is not among them:
    it leaves the tokenizer at decoding as it is."""
    d, pairs = run.cfg.data, []
    for key in SHARED_DATA_KEYS:
        value = getattr(d, key)
        if key != "tokenizer":
            pairs.append((key, value))
            continue
        pairs.append(("tokenizer", value.kind))
        pairs += [(f"tokenizer.{f.name}", getattr(value, f.name))
                  for f in dataclasses.fields(value)
                  if f.name != "kind" and f.name not in value.SAMPLING]
    return pairs


def _first_difference(a: Run, b: Run) -> str | None:
    for (key, x), (_, y) in zip(_shared_settings(a), _shared_settings(b)):
        if x != y:
            return f"its data.{key} is {y!r}, not {x!r}"
    for name in sorted(set(a.files) | set(b.files)):
        if a.files.get(name) != b.files.get(name):
            return f"its tokenizer file {name} differs"
    for side, x, y in (("source", a.src_vocab, b.src_vocab), ("target", a.tgt_vocab, b.tgt_vocab)):
        at = next((i for i, (s, t) in enumerate(zip(x.itos, y.itos)) if s != t), None)
        if at is not None:
            return f"its {side} vocabulary differs at id {at} ({y.itos[at]!r}, not {x.itos[at]!r})"
        if len(x) != len(y):
            return f"its {side} vocabulary has {len(y)} tokens, not {len(x)}"
    return None
