"""What a search is asked (SearchRequest) and what it gives back (Hypothesis): the one
interface between a Translator and any engine (mt.decoding.engines)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from mt.config import DecodeConfig
from mt.decoding.lexical import Terms
from mt.decoding.record import Trace

# What a model's encode gave for src, when the caller has it already (the Translator, which
# reads the same encoder output again for word alignments): the search then skips encode.
Memory = Any


@dataclass
class SearchRequest:
    """A batch to search, and what to keep of each hypothesis. An engine states what it can
    do (mt.decoding.engines.Capabilities), and `engines.search_with` checks a request against
    that before the engine sees it."""

    src: torch.Tensor  # (B, S) source ids, padded with PAD
    cfg: DecodeConfig
    # (B, P) target ids forced at the start of each sentence's hypotheses (and part of them),
    # padded with PAD; a row of PAD or None: none
    prefix: torch.Tensor | None = None
    terms: Terms | None = None  # target terms each output must hold (mt.decoding.lexical)
    memory: Memory | None = None  # the model's encode(src), when the caller has it
    # What to record. scores: every hypothesis scored (else a search that does not score,
    # greedy or sampling, leaves NaN); attention: each hypothesis's cross-attention
    # (Hypothesis.attention); trace: what mt.confidence reads of it (Hypothesis.trace). An
    # engine that cannot record attention or a trace leaves them None: the caller computes
    # them itself.
    scores: bool = False
    attention: bool = False
    trace: bool = False


@dataclass
class Hypothesis:
    tokens: list[int]  # target ids without <bos>/<eos>
    score: float  # length-penalised log-probability (mt.decoding.scores)
    # holds its terms (mt.decoding.lexical); False only when the length limit cut it short
    held: bool = True
    # (T, S): the cross-attention (layers and heads averaged) of the step that chose each
    # token, over the padded source; beam search gives it when asked (SearchRequest.attention)
    attention: torch.Tensor | None = field(default=None, compare=False, repr=False)
    # what mt.confidence reads of it, recorded by the search when asked (SearchRequest.trace)
    trace: Trace | None = field(default=None, compare=False, repr=False)
