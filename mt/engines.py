"""What decodes a Translator's batches: mt's own search over a model (ModelEngine, mt.decode)
or another engine that keeps the Engine protocol (CTranslate2's, mt.ct2.search)."""

from __future__ import annotations

import copy
from typing import Protocol

import torch

from mt.config import DecodeConfig
from mt.constrained import Terms
from mt.decode import Hypothesis, Memory, beam_search, greedy, sample, sequence_scores
from mt.device import has_native_bf16
from mt.errors import ConfigError
from mt.int8 import int8_model
from mt.log import warn
from mt.model import Seq2Seq

ENGINES = ("mt", "ctranslate2")  # what Translator.load decodes with (`--engine`)
# Greedy and sampling keep no terms: with beam 1 the banks would leave the one beam to the
# hypothesis furthest on, forcing every term at once, so a glossary asks for beam search.
GREEDY_GLOSSARY = ("a glossary's terms are kept by beam search: give --beam 2 or more (the "
                   "number of terms in a line plus one, or more, keeps them fluent)")


class Engine(Protocol):
    """How a Translator decodes a batch: mt's own (ModelEngine) or CTranslate2's
    (mt.ct2.search.CTranslate2Engine)."""

    def search(self, src: torch.Tensor, cfg: DecodeConfig, scored: bool,
               prefix: torch.Tensor | None = None, terms: Terms | None = None
               ) -> list[list[Hypothesis]]:
        """src (B, S) padded ids -> up to cfg.nbest hypotheses per sentence, best first.

        Scores only when scored; otherwise a hypothesis may be scored NaN. prefix (B, P):
        target ids padded with PAD, forced at the start of each sentence's hypotheses (and
        part of them); None: none (mt.decode). terms: target terms each output must hold
        (mt.constrained; beam search only); an engine without them raises ConfigError."""


class ModelEngine:
    """mt's own search (mt.decode) on a model: beam search when decode.beam > 1, else sampling
    when decode.sampling is set (decode.samples per sentence, in the order drawn), else greedy."""

    def __init__(self, model: Seq2Seq):
        self.model = model

    def search(self, src: torch.Tensor, cfg: DecodeConfig, scored: bool,
               prefix: torch.Tensor | None = None, terms: Terms | None = None,
               memory: Memory | None = None, attend: bool = False, trace: bool = False
               ) -> list[list[Hypothesis]]:
        """memory: the model's encode(src), when the caller has it (mt.decode.Memory).
        attend: beam search gives each hypothesis its cross-attention (Hypothesis.attention),
        where it can (a Seq2Seq); else the caller computes it. trace: each hypothesis gets
        what mt.confidence reads of it (Hypothesis.trace, mt.trace), from the search itself."""
        self.model.eval()
        if cfg.beam > 1:
            return beam_search(self.model, src, cfg, prefix, terms, memory,
                               attend and isinstance(self.model, Seq2Seq), trace)
        if terms is not None:
            raise ConfigError(GREEDY_GLOSSARY)
        n = cfg.samples if cfg.sampling != "none" else 1
        hyps = (sample if cfg.sampling != "none" else greedy)(self.model, src, cfg, prefix,
                                                               memory, trace)
        traces = [None] * len(hyps)
        if trace:
            hyps, traces = [h for h, _ in hyps], [t for _, t in hyps]
        # Neither scores; rescore (one teacher-forced pass) only when scores are shown.
        scores = (sequence_scores(self.model, src.repeat_interleave(n, 0), hyps, cfg) if scored
                  else [float("nan")] * len(hyps))
        found = [Hypothesis(h, s, trace=t) for h, s, t in zip(hyps, scores, traces, strict=True)]
        return [found[i: i + n] for i in range(0, len(found), n)]


def inference_layout(model: torch.nn.Module) -> None:
    """In place, on a CPU model that only decodes: every Linear's weight (out, in) re-laid out
    as the transpose of a contiguous (in, out) matrix. Same values; MKL multiplies the few rows
    of a decoding step by that layout up to twice as fast (benchmarks/bench_hf.py). An
    embedding tied to the output projection follows it, and its lookups, a few rows a step,
    barely notice. Not for a model that trains: gradients and optimizers expect the usual
    layout."""
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and module.weight.device.type == "cpu":
            module.weight.data = module.weight.data.t().contiguous().t()


def decoding_model(model: Seq2Seq, dtype: str, device: torch.device) -> Seq2Seq:
    """The model in decode.dtype: itself for float32; for bf16 and int8 a copy, so the run's
    float32 model stays as it is for whoever else holds it."""
    if dtype == "int8":
        return int8_model(model, device)
    if dtype != "bf16":
        return model
    if not has_native_bf16(device):
        warn(f"decode.dtype bf16: this {device.type.upper()} device has no native bf16, so it "
             "is emulated and slower than float32")
    return copy.deepcopy(model).to(torch.bfloat16)
