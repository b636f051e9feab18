"""Several models as one for mt.decoding: an Ensemble is Decodable (mt.decoding.search), as
Seq2Seq is, so greedy, sampling and beam search run over it unchanged.

At each step it gives the mean of its models' log-probabilities (of their log-softmax), not
renormalised: so an ensemble of a model with itself is that model, scores included. Each model
keeps its own DecoderCache; the EnsembleCache reorders them together, as beam search moves
hypotheses. The models share the source and target vocabularies (check_ensemble, below,
which opening an ensemble's runs applies).

Shapes as in mt.model: B rows, T target positions, V target vocabulary.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from mt.checkpoint import Run, open_run
from mt.errors import ConfigError
from mt.kernels import log_softmax_entropy
from mt.model import DecoderCache, Seq2Seq


@dataclass
class EnsembleCache:
    caches: list[DecoderCache]  # one per model, in the Ensemble's order

    def reorder(self, index: torch.Tensor, group: int | None = None) -> EnsembleCache:
        """DecoderCache.reorder on every model's cache: the rows move together."""
        return EnsembleCache([c.reorder(index, group) for c in self.caches])


class Ensemble(nn.Module):
    def __init__(self, models: list[Seq2Seq]):
        super().__init__()
        self.models = nn.ModuleList(models)
        first = models[0]
        # The shortest positional table bounds every model's output.
        self.cfg = dataclasses.replace(first.cfg,
                                       max_positions=min(m.cfg.max_positions for m in models))
        self.vocab_size = first.vocab_size

    def src_mask(self, src: torch.Tensor) -> torch.Tensor:
        return self.models[0].src_mask(src)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> list[torch.Tensor]:
        """src (B, S) -> each model's memory (B, S, D_m)."""
        return [m.encode(src, src_mask) for m in self.models]

    def start_cache(self, memories: list[torch.Tensor], src_mask: torch.Tensor) -> EnsembleCache:
        return EnsembleCache([m.start_cache(x, src_mask)
                              for m, x in zip(self.models, memories, strict=True)])

    @property
    def members(self) -> int:
        """The number of models (mt.decoding: a trace records each one's log-probabilities)."""
        return len(self.models)

    def decode(self, tgt: torch.Tensor, cache: EnsembleCache, need_weights: bool = False,
               members: bool = False) -> tuple:
        """tgt (B, T) -> the mean log-probabilities (B, T, V), float32, and the caches; with
        need_weights, a third item: every model's decoder layers' cross-attention weights
        (B, H_m, T, S), one model's after the other's (as cross_attention); with members (and
        need_weights), a fourth: each model's log-probabilities (B, T, V)."""
        total, caches, weights, each = None, [], [], []
        for m, c in zip(self.models, cache.caches, strict=True):
            states, c, *w = m.decode(tgt, c, need_weights)
            lprobs = m.log_probs(m.next_scores(states))  # a new tensor: summed into in place
            if members:
                each.append(lprobs)
                lprobs = lprobs.clone() if total is None else lprobs
            total = lprobs if total is None else total.add_(lprobs)
            caches.append(c)
            weights += w[0] if need_weights else []
        out = (total.div_(len(self.models)), EnsembleCache(caches))
        return out + ((weights,) if need_weights else ()) + ((each,) if members else ())

    def next_scores(self, states: torch.Tensor) -> torch.Tensor:
        """decode's "states" are already the next-token scores: the mean log-probabilities."""
        return states

    def log_probs(self, scores: torch.Tensor) -> torch.Tensor:
        """next_scores' output as log-probabilities: they are already (see decode)."""
        return scores.float()

    def log_probs_entropy(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log_probs, and each row's entropy, as a traced search records them
        (mt.decoding.record)."""
        return log_softmax_entropy(scores.float(), normalized=True)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher-forced mean log-probabilities (B, T, V), as `decode` gives them."""
        src_mask = self.src_mask(src)
        return self.decode(tgt_in, self.start_cache(self.encode(src, src_mask), src_mask))[0]

    @torch.no_grad()
    def cross_attention(self, src: torch.Tensor, tgt_in: torch.Tensor,
                        memory: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
        """Every model's decoder layers' weights (Seq2Seq.cross_attention), one after the
        other: (B, H_m, T, S) each. memory: encode(src), if the caller has it."""
        memories = memory or [None] * len(self.models)
        return [w for m, x in zip(self.models, memories, strict=True)
                for w in m.cross_attention(src, tgt_in, x)]


# Opening an ensemble: runs whose models can be averaged token by token.

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
