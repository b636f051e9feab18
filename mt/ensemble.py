"""Several models as one for mt.decode: an Ensemble keeps Seq2Seq's decoding interface
(src_mask, encode, start_cache, decode, generator, log_probs, forward), so greedy, sampling
and beam search run over it unchanged.

At each step it gives the mean of its models' log-probabilities (of their log-softmax), not
renormalised: so an ensemble of a model with itself is that model, scores included. Each model
keeps its own DecoderCache; the EnsembleCache reorders them together, as beam search moves
hypotheses. The models share the source and target vocabularies (mt.translator checks).

Shapes as in mt.model: B rows, T target positions, V target vocabulary.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import nn

from mt.model import DecoderCache, Seq2Seq


@dataclass
class EnsembleCache:
    caches: list[DecoderCache]  # one per model, in the Ensemble's order

    def reorder(self, index: torch.Tensor, group: int | None = None) -> EnsembleCache:
        """DecoderCache.reorder on every model's cache: the rows move together."""
        return EnsembleCache([c.reorder(index, group) for c in self.caches])


class MeanLogProbs(nn.Identity):
    """An Ensemble's generator: its decoder "states" are already the models' mean
    log-probabilities (B, T, V), so there is nothing left to project."""

    def __init__(self, out_features: int):
        super().__init__()
        self.out_features = out_features


class Ensemble(nn.Module):
    def __init__(self, models: list[Seq2Seq]):
        super().__init__()
        self.models = nn.ModuleList(models)
        first = models[0]
        # The shortest positional table bounds every model's output.
        self.cfg = dataclasses.replace(first.cfg,
                                       max_positions=min(m.cfg.max_positions for m in models))
        self.generator = MeanLogProbs(first.generator.out_features)

    def src_mask(self, src: torch.Tensor) -> torch.Tensor:
        return self.models[0].src_mask(src)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> list[torch.Tensor]:
        """src (B, S) -> each model's memory (B, S, D_m)."""
        return [m.encode(src, src_mask) for m in self.models]

    def start_cache(self, memories: list[torch.Tensor], src_mask: torch.Tensor) -> EnsembleCache:
        return EnsembleCache([m.start_cache(x, src_mask)
                              for m, x in zip(self.models, memories, strict=True)])

    def decode(self, tgt: torch.Tensor, cache: EnsembleCache
               ) -> tuple[torch.Tensor, EnsembleCache]:
        """tgt (B, T) -> the mean log-probabilities (B, T, V), float32, and the caches."""
        total, caches = None, []
        for m, c in zip(self.models, cache.caches, strict=True):
            states, c = m.decode(tgt, c)
            lprobs = m.log_probs(m.generator(states))  # a new tensor: summed into in place
            total = lprobs if total is None else total.add_(lprobs)
            caches.append(c)
        return total.div_(len(self.models)), EnsembleCache(caches)

    def log_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """The generator's output as log-probabilities: here they are already (see decode)."""
        return logits.float()

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher-forced mean log-probabilities (B, T, V), as `decode` gives them."""
        src_mask = self.src_mask(src)
        return self.decode(tgt_in, self.start_cache(self.encode(src, src_mask), src_mask))[0]

    @torch.no_grad()
    def cross_attention(self, src: torch.Tensor, tgt_in: torch.Tensor) -> list[torch.Tensor]:
        """Every model's decoder layers' weights (Seq2Seq.cross_attention), one after the
        other: (B, H_m, T, S) each."""
        return [w for m in self.models for w in m.cross_attention(src, tgt_in)]
