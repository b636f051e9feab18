"""A search over a lexical shortlist (decode.shortlist; the table: mt.shortlist): per batch,
the output projection runs over the target ids the batch may need (`needed`: its source
tokens' lists, the frequent ones, the special tokens, every forced-prefix and glossary-term
token) rather than the whole vocabulary.

The search runs in the list's own ids (`search_listed`): token i of the search is target id
ids[i]. The model (`Shortlisted`) embeds ids[i] and scores the V' listed tokens alone; the
request's prefix and terms are given in list ids, and the hypotheses' tokens are mapped back
at the end. So every per-step pass over the scores (the argmax, the log-softmax, beam
search's ranking, the constraints) runs over V' columns rather than V, as well as the
product. The special tokens are the vocabulary's first ids and always listed, so <pad>,
<unk>, <eos> keep their ids in the list. With every token listed the search is the full
one, exactly (tests/test_shortlist.py). Scores are normalized over the list, as Marian's
shortlist does.

An ensemble (mt.ensemble) projects each member over the same list: the run's table.

Shapes: r live rows, D model, V the target vocabulary, V' the listed tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from mt.decoding.lexical import NONE
from mt.decoding.packed import PackedLinear
from mt.decoding.precision import Int8Linear
from mt.decoding.request import Hypothesis, SearchRequest
from mt.decoding.search import Rule, search
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


def search_listed(model: nn.Module, request: SearchRequest, rule: type[Rule], ids: torch.Tensor
                  ) -> list[list[Hypothesis]]:
    """mt.decoding.search's search of request over the target ids (V',) alone (sorted, the
    special tokens among them): its hypotheses in target ids, as the full search gives them."""
    ids = ids.to(request.src.device)
    terms = request.terms
    if terms is not None:
        terms = replace(terms, ids=listed(ids, terms.ids),
                        blocked=None if terms.blocked is None else listed(ids, terms.blocked))
    prefix = None if request.prefix is None else listed(ids, request.prefix)
    found = search(shortlisted(model, ids), replace(request, prefix=prefix, terms=terms), rule)
    table = ids.tolist()
    for hyps in found:
        for h in hyps:
            h.tokens = [table[t] for t in h.tokens]
    return found


def listed(ids: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Target ids (any shape; NONE: no token) -> their places in the sorted ids (V',); NONE for
    NONE and for a token not listed (a glossary's blocked word the list does without)."""
    at = torch.searchsorted(ids, tokens.clamp(min=0)).clamp(max=len(ids) - 1)
    return torch.where((tokens >= 0) & (ids[at] == tokens), at, NONE)


def shortlisted(model: nn.Module, ids: torch.Tensor) -> nn.Module:
    """model (a Seq2Seq, or an Ensemble of them) over the target ids (V',) alone, in their
    places: token i is target id ids[i]."""
    members = getattr(model, "models", None)
    if members is None:
        return Shortlisted(model, ids)
    return type(model)([Shortlisted(m, ids) for m in members]).eval()


class Shortlisted(nn.Module):
    """A Seq2Seq over the target ids (V',) alone: it reads and scores token i as target id
    ids[i]. Decodable (mt.decoding.search) as the model is, its encoder and decoder the
    model's own."""

    def __init__(self, model: nn.Module, ids: torch.Tensor):
        super().__init__()
        self.model, self.cfg, self.vocab_size = model, model.cfg, len(ids)
        self.ids = ids.to(_device(model))
        self.project = _projection(model, self.ids)

    def src_mask(self, src: torch.Tensor) -> torch.Tensor:
        return self.model.src_mask(src)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        return self.model.encode(src, src_mask)

    def start_cache(self, memory: torch.Tensor, src_mask: torch.Tensor):
        return self.model.start_cache(memory, src_mask)

    def decode(self, tgt: torch.Tensor, cache, need_weights: bool = False) -> tuple:
        return self.model.decode(self.ids[tgt], cache, need_weights)

    def next_scores(self, states: torch.Tensor) -> torch.Tensor:
        """Decoder states (..., D) -> the listed tokens' logits (..., V')."""
        return self.project(states)

    def log_probs(self, logits: torch.Tensor) -> torch.Tensor:
        return self.model.log_probs(logits)

    def log_normalizer(self, logits: torch.Tensor) -> torch.Tensor:
        return self.model.log_normalizer(logits)

    def normalizer_entropy(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.normalizer_entropy(logits)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.next_scores(self.model(src, self.ids[tgt_in], project=False))


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _projection(model: nn.Module, ids: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """The output projection onto the rows `ids` alone, made once per batch: an Int8Linear of
    them (decode.dtype int8), their weight packed where the model's is (bf16 on a CPU with
    it in hardware: mt.decoding.packed), else torch's product."""
    generator = model.generator
    if isinstance(generator, Int8Linear):  # its logits bias is inside the packed weight
        weight, bias = torch.ops.quantized.linear_unpack(generator.packed)
        return Int8Linear(weight.dequantize()[ids], None if bias is None else bias[ids])
    weight = generator.weight.index_select(0, ids)
    bias = None if model.logits_bias is None else model.logits_bias[ids].to(weight.dtype)
    if isinstance(generator, PackedLinear):
        return PackedLinear(weight, bias)
    return partial(F.linear, weight=weight, bias=bias)
