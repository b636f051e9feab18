"""Translating lines, lists and streams: tokenize, length-sorted token-budget batches, decode,
detokenize, restore the input order."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from mt.checkpoint import Run
from mt.config import DecodeConfig
from mt.data import group_bounds, pad
from mt.decode import Hypothesis, beam_search, greedy, sequence_scores
from mt.device import has_native_bf16
from mt.log import warn

CHUNK_LINES = 2000  # lines read, sorted and translated together: bounds memory on any input


@dataclass
class Translation:
    text: str  # detokenized, on one line
    score: float  # length-penalised log-probability (see mt.decode); 0.0 for an empty input


def format_nbest(index: int, translations: list[Translation]) -> str:
    """The n-best format: one `index<TAB>score<TAB>text` line per translation, best first."""
    return "".join(f"{index}\t{t.score:.4f}\t{t.text}\n" for t in translations)


class Translator:
    def __init__(self, run: Run, decode: DecodeConfig | None = None,
                 device: torch.device | str = "cpu", engine=None):
        self.run, self.device = run, torch.device(device)
        self.engine = engine  # another engine's search (mt.engine); None: mt's own decoders
        self.decode_cfg = decode or run.cfg.decode
        self.model = run.model
        if self.decode_cfg.dtype == "bf16" and engine is None:
            if not has_native_bf16(self.device):
                warn(f"decode.dtype bf16: this {self.device.type.upper()} device has no native "
                     "bf16, so it is emulated and slower than float32")
            # A copy: the run's float32 model stays as it is for whoever else holds it.
            self.model = copy.deepcopy(run.model).to(torch.bfloat16)
        self.src_tok, self.tgt_tok = run.src_tok, run.tgt_tok
        self.max_src = run.cfg.model.max_positions
        self.truncated = 0  # source lines cut to the model's positions

    def translate(self, lines: list[str]) -> list[str]:
        """One output per input, in order; empty (or all-whitespace) input gives empty output."""
        return [best[0].text for best in self._translate(lines, scored=False)]

    def translate_nbest(self, lines: list[str]) -> list[list[Translation]]:
        """Up to decode.nbest distinct translations per input, best first, in input order.

        An empty (or all-whitespace) input has one translation: the empty one, scored 0.0.
        """
        return self._translate(lines, scored=True)

    def _translate(self, lines: list[str], scored: bool) -> list[list[Translation]]:
        ids = []
        for toks in self.src_tok.tokenize_many(lines):
            if len(toks) > self.max_src:
                self.truncated += 1
                toks = toks[: self.max_src]
            ids.append(self.run.src_vocab.encode(toks))
        out = [[Translation("", 0.0)] for _ in lines]
        order = sorted((i for i in range(len(ids)) if ids[i]), key=lambda i: len(ids[i]))
        K = self.decode_cfg.beam  # beam search decodes K rows per sentence: budget K x tokens
        sizes = np.array([K * len(ids[i]) for i in order], dtype=np.int64)
        bounds = group_bounds(sizes, np.zeros_like(sizes), self.decode_cfg.batch_tokens)
        for group in (order[a:b] for a, b in zip(bounds[:-1], bounds[1:])):
            src = pad([ids[i] for i in group]).to(self.device)
            for i, hyps in zip(group, self._search(src, scored), strict=True):
                out[i] = [Translation(self._detokenize(h.tokens), h.score) for h in hyps]
        return out

    def _detokenize(self, ids: list[int]) -> str:
        text = self.tgt_tok.detokenize(self.run.tgt_vocab.decode(ids))
        # Only plain spaces inside a line, so no reader splits it into two.
        return " ".join(text.split())

    def _search(self, src: torch.Tensor, scored: bool) -> list[list[Hypothesis]]:
        if self.engine is not None:
            return self.engine.search(src, self.decode_cfg, scored)
        c, model = self.decode_cfg, self.model
        model.eval()
        if c.beam > 1:
            return beam_search(model, src, c)
        hyps = greedy(model, src, c.max_len_a, c.max_len_b, c.min_len)
        # Greedy does not score; rescore (one teacher-forced pass) only when scores are shown.
        scores = sequence_scores(model, src, hyps, c) if scored else [float("nan")] * len(hyps)
        return [[Hypothesis(h, s)] for h, s in zip(hyps, scores, strict=True)]

    def translate_stream(self, lines: Iterable[str]) -> Iterator[str]:
        """Translate an iterable of lines chunk by chunk, yielding outputs in input order."""
        return (best[0].text for best in self.translate_nbest_stream(lines, scored=False))

    def translate_nbest_stream(self, lines: Iterable[str], scored: bool = True
                               ) -> Iterator[list[Translation]]:
        """translate_nbest over an iterable of lines, chunk by chunk, in input order."""
        it = iter(lines)
        while chunk := list(itertools.islice(it, CHUNK_LINES)):
            yield from self._translate(chunk, scored)
        if self.truncated:
            warn(f"{self.truncated} source line(s) longer than model.max_positions "
                 f"({self.max_src} tokens) were truncated")
            self.truncated = 0
