"""What decodes a Translator's batches: mt's own search over a model (ModelEngine,
mt.decoding.search) or another engine that keeps the Engine protocol (CTranslate2's,
mt.ct2.search). Each takes a SearchRequest and states what it can do with one
(Capabilities); `search_with` checks the request against that, in this one place."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

import torch

from mt.config import DecodeConfig
from mt.decoding.request import Hypothesis, SearchRequest
from mt.decoding.rules import pick
from mt.decoding.scores import sequence_scores
from mt.decoding.search import search
from mt.decoding.shortlist import needed, search_listed
from mt.errors import ConfigError
from mt.model import Seq2Seq
from mt.shortlist import Shortlist

ENGINES = ("mt", "ctranslate2")
# decode.shortlist auto: a list longer than this share of the vocabulary is not used: it saves
# little, and its outputs still depend on the batch (docs/decoding.md#shortlist)
AUTO_SHARE = 0.5  # what Translator.load decodes with (`--engine`)
# Greedy and sampling keep no terms: with beam 1 the banks would leave the one beam to the
# hypothesis furthest on, forcing every term at once, so a glossary asks for beam search.
GREEDY_GLOSSARY = ("a glossary's terms are kept by beam search: give --beam 2 or more (the "
                   "number of terms in a line plus one, or more, keeps them fluent)")


@dataclass(frozen=True)
class Capabilities:
    """What an engine's search does with a request under one DecodeConfig. What it cannot do
    that the request asks for is refused (a ConfigError: terms, a prefix, sampling); what it
    cannot record is left out (the hypotheses' attention or trace stay None, and the caller
    computes them itself, from a teacher-forced pass)."""

    prefix: bool = True  # forces a target prefix
    sampling: bool = True  # samples (decode.sampling)
    terms: bool = False  # keeps lexical constraints
    no_terms: str = GREEDY_GLOSSARY  # why it does not
    attention: bool = False  # records each hypothesis's cross-attention
    trace: bool = False  # records what mt.confidence reads
    memory: bool = False  # takes the model's encoder output (SearchRequest.memory)


class Engine(Protocol):
    """How a Translator decodes a batch: mt's own (ModelEngine) or CTranslate2's
    (mt.ct2.search.CTranslate2Engine)."""

    # the model its outputs can be run through again, teacher-forced (word alignments,
    # attention and confidence where the search recorded none); None: an engine without one
    model: torch.nn.Module | None

    def capabilities(self, cfg: DecodeConfig) -> Capabilities: ...

    def search(self, request: SearchRequest) -> list[list[Hypothesis]]:
        """request.src (B, S) padded ids -> up to cfg.nbest hypotheses per sentence, best
        first, with what the request asks for and the engine can (search_with checks)."""


def search_with(engine: Engine, request: SearchRequest) -> list[list[Hypothesis]]:
    """engine's hypotheses for request, checked against its capabilities first: a ConfigError
    for what it cannot do, the records it cannot keep left out of the request."""
    can, cfg = engine.capabilities(request.cfg), request.cfg
    for asked, able, why in ((request.terms is not None, can.terms, can.no_terms),
                             (request.prefix is not None, can.prefix,
                              "a target prefix: this engine cannot force one"),
                             (cfg.sampling != "none", can.sampling,
                              f"decode.sampling {cfg.sampling}: this engine cannot sample")):
        if asked and not able:
            raise ConfigError(why)
    return engine.search(replace(request, memory=request.memory if can.memory else None,
                                 attention=request.attention and can.attention,
                                 trace=request.trace and can.trace))


class ModelEngine:
    """mt's own search (mt.decoding.search) on a model, with the rule its config picks
    (mt.decoding.rules): beam search when decode.beam > 1, else sampling when decode.sampling
    is set (decode.samples per sentence, in the order drawn), else greedy. shortlist: the
    run's lexical shortlist (mt.shortlist), which decode.shortlist turns on."""

    def __init__(self, model: torch.nn.Module, shortlist: Shortlist | None = None):
        self.model, self.shortlist = model, shortlist

    def capabilities(self, cfg: DecodeConfig) -> Capabilities:
        rule = pick(cfg)
        return Capabilities(terms=rule.supports_terms, trace=True, memory=True,
                            no_terms=f"decode.beam {cfg.beam}: {GREEDY_GLOSSARY}",
                            attention=rule.supports_attention and isinstance(self.model, Seq2Seq))

    def search(self, request: SearchRequest) -> list[list[Hypothesis]]:
        self.model.eval()
        rule = pick(request.cfg)
        ids = self._listed(request)
        found = (search(self.model, request, rule) if ids is None else
                 search_listed(self.model, request, rule, ids))
        if rule.scored or not request.scores:
            return found
        # greedy and sampling do not score: one teacher-forced pass, only when scores are shown
        rows = [b for b, hyps in enumerate(found) for _ in hyps]
        hyps = [h for hyps in found for h in hyps]
        scores = sequence_scores(self.model, request.src[rows], [h.tokens for h in hyps],
                                 request.cfg)
        for h, s in zip(hyps, scores, strict=True):
            h.score = s
        return found

    def _listed(self, request: SearchRequest) -> torch.Tensor | None:
        """The target ids (V',) to search over: the request's shortlist where decode.shortlist
        asks for it (auto: where the run has one and it lists at most AUTO_SHARE of the
        vocabulary); None: the whole vocabulary."""
        mode = request.cfg.shortlist
        if mode == "off" or (mode == "auto" and self.shortlist is None):
            return None
        if self.shortlist is None:
            raise ConfigError("decode.shortlist on: this run has no lexical shortlist; build "
                              "one with mt shortlist RUN (docs/decoding.md#shortlist)")
        ids = needed(self.shortlist, request)
        if mode == "auto" and len(ids) > AUTO_SHARE * self.model.vocab_size:
            return None
        return ids
