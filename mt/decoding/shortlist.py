"""A search over a lexical shortlist (decode.shortlist; the table: mt.shortlist): per batch,
the output projection runs over the target ids the batch may need (`needed`: its source
tokens' lists, the frequent ones, the special tokens, every forced-prefix and glossary-term
token) rather than the whole vocabulary.

The search itself still works in full-vocabulary ids: `Shortlisted.next_scores` writes the
V' scores it computed into a (r, V) row of -inf. So the rules, `Constraints.apply`,
sampling, the record and the ids of every hypothesis are those of the full search unchanged,
and a token outside the list simply never wins; with every token listed the search is the
full one, exactly (tests/test_shortlist.py). The price is one fill and one scatter of the
(r, V) scores a step, small beside the (r, D) x (D, V) product it replaces by (r, D) x (D, V')
(docs/decoding.md#shortlist has the measurement). Scores are normalized over the list, as
Marian's shortlist does.

An ensemble (mt.ensemble) projects each member over the same list: the run's table.

Shapes: r live rows, D model, V the target vocabulary, V' the listed tokens.
"""

from __future__ import annotations

import torch
from torch import nn

from mt.decoding.precision import Int8Linear
from mt.decoding.request import SearchRequest
from mt.shortlist import Shortlist
from mt.vocab import PAD


def needed(shortlist: Shortlist, request: SearchRequest) -> torch.Tensor:
    """The sorted target ids (V',) a request's search may write: its sources' candidates,
    and every token of its forced prefixes and of its glossary terms (never cut)."""
    parts = [shortlist.candidates(request.src)]
    if request.prefix is not None:
        parts.append(request.prefix[request.prefix != PAD].cpu())
    if request.terms is not None:
        parts.append(request.terms.ids[request.terms.ids >= 0].cpu())
    return torch.cat(parts).unique()


def shortlisted(model: nn.Module, ids: torch.Tensor) -> nn.Module:
    """model (a Seq2Seq, or an Ensemble of them) projecting onto target ids (V',) alone."""
    members = getattr(model, "models", None)
    if members is None:
        return Shortlisted(model, ids)
    return type(model)([Shortlisted(m, ids) for m in members]).eval()


class Shortlisted(nn.Module):
    """A Seq2Seq whose next_scores are its logits over `ids` alone, -inf elsewhere: Decodable
    (mt.decoding.search) as the model is, everything but the projection the model's own."""

    def __init__(self, model: nn.Module, ids: torch.Tensor):
        super().__init__()
        self.model, self.cfg, self.vocab_size = model, model.cfg, model.vocab_size
        self.ids = ids.to(_device(model))
        self.weight, self.bias = _rows(model, self.ids)

    def src_mask(self, src: torch.Tensor) -> torch.Tensor:
        return self.model.src_mask(src)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        return self.model.encode(src, src_mask)

    def start_cache(self, memory: torch.Tensor, src_mask: torch.Tensor):
        return self.model.start_cache(memory, src_mask)

    def decode(self, tgt: torch.Tensor, cache, need_weights: bool = False) -> tuple:
        return self.model.decode(tgt, cache, need_weights)

    def next_scores(self, states: torch.Tensor) -> torch.Tensor:
        """Decoder states (..., D) -> logits (..., V): the listed tokens' from the smaller
        product, -inf for the others."""
        if isinstance(self.weight, Int8Linear):
            listed = self.weight(states)
        else:
            listed = nn.functional.linear(states, self.weight, self.bias)  # (..., V')
        out = listed.new_full((*listed.shape[:-1], self.vocab_size), float("-inf"))
        return out.index_copy_(-1, self.ids, listed)

    def log_probs(self, logits: torch.Tensor) -> torch.Tensor:
        return self.model.log_probs(logits)

    def log_probs_entropy(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.log_probs_entropy(logits)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.next_scores(self.model(src, tgt_in, project=False))


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _rows(model: nn.Module, ids: torch.Tensor
          ) -> tuple[torch.Tensor | Int8Linear, torch.Tensor | None]:
    """The output projection's rows `ids`: (weight (V', D), bias (V',) or None), once per
    batch; an int8 projection (decode.dtype int8) as an Int8Linear of those rows."""
    generator = model.generator
    if isinstance(generator, Int8Linear):  # its logits bias is inside the packed weight
        weight, bias = torch.ops.quantized.linear_unpack(generator.packed)
        return Int8Linear(weight.dequantize()[ids], None if bias is None else bias[ids]), None
    bias = None if model.logits_bias is None else model.logits_bias[ids]
    return generator.weight.index_select(0, ids), bias
