"""Several models as one for mt.decoding: an Ensemble is Decodable (mt.decoding.search), as
Seq2Seq is, so greedy, sampling and beam search run over it unchanged.

At each step it gives the mean of its models' log-probabilities (of their log-softmax), not
renormalised: so an ensemble of a model with itself is that model, scores included. Each model
keeps its own DecoderCache; the EnsembleCache reorders them together, as beam search moves
hypotheses. The models share the source and target vocabularies (mt.runs.check_ensemble,
which opening an ensemble's runs applies).

Shapes as in mt.model: B rows, T target positions, V target vocabulary.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import nn

from mt.kernels import logsumexp_entropy
from mt.model import DecoderCache, Seq2Seq


@dataclass
class EnsembleCache:
    caches: list[DecoderCache]  # one per model, in the Ensemble's order

    def reorder(self, index: torch.Tensor, group: int | None = None) -> EnsembleCache:
        """DecoderCache.reorder on every model's cache: the rows move together."""
        return EnsembleCache([c.reorder(index, group) for c in self.caches])

    def to_static(self, length: int, padded: bool = False, core=None) -> EnsembleCache:
        """DecoderCache.to_static on every model's cache: each member's step its own."""
        return EnsembleCache([c.to_static(length, padded, core) for c in self.caches])


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

    def log_normalizer(self, scores: torch.Tensor) -> torch.Tensor:
        """Nothing to subtract: the scores are log-probabilities."""
        return scores.new_zeros(scores.size(0))

    def normalizer_entropy(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log_normalizer, and each row's entropy, as a traced search records them
        (mt.decoding.record)."""
        return logsumexp_entropy(scores, normalized=True)

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
