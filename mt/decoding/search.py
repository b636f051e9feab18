"""The one search loop over the model's encode/decode interface, KV-cached, with a Rule plugged
in: greedy, sampling and beam search (mt.decoding.rules) differ only in their rule.

Each step the loop feeds the newest token of every live row to the decoder, hands the
next-token scores to the rule, and does what the rule decided (Moves): the rows that took
<eos> become Hypotheses, the others move (one `cache.reorder`, which also drops finished rows)
and take their next token. The record (mt.decoding.record) is called once per step, before
the rule's constraints change the scores. The encoder runs once.

A search emits <eos> no earlier than `min_len` tokens and must emit it after
`max_len_a * src_len + max_len_b` tokens (mt.decoding.constraints); <pad> is never generated
(a trained model does not emit <bos> either; a Marian model, whose decoder starts from <pad>,
might). A forced target prefix is taken first, scored like any other token. `model` is
anything Decodable: a Seq2Seq, or several as one (mt.ensemble.Ensemble).

Shapes: B batch, S source length, T target length, V vocab, r live rows of the search
(sentences, samples or beams), K beam.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import torch

from mt.config import DecodeConfig, ModelConfig
from mt.decoding.constraints import Constraints
from mt.decoding.record import Recorder
from mt.decoding.request import Hypothesis, SearchRequest
from mt.decoding.step import static, step
from mt.vocab import start_id

CHUNK = 64  # scores per chunk, in the chunked reductions (argmax, beam_step, sampling)


@runtime_checkable
class Decodable(Protocol):
    """What the searches need of a model (mt.model.Seq2Seq and mt.ensemble.Ensemble have it).
    Shapes: B rows, S source and T target positions, V the target vocabulary."""

    cfg: ModelConfig  # its max_positions bounds every output
    vocab_size: int  # V

    def src_mask(self, src: torch.Tensor) -> torch.Tensor: ...

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> Any:
        """src (B, S) -> the memory start_cache takes."""

    def start_cache(self, memory: Any, src_mask: torch.Tensor) -> Any:
        """The decoder's cache, with a reorder(index, group=None) method (beams move)."""

    def decode(self, tgt: torch.Tensor, cache: Any, need_weights: bool = False) -> tuple:
        """tgt (B, T) new tokens -> (states (B, T, ...), the cache extended); need_weights:
        a third item, each decoder layer's cross-attention (B, H, T, S). An ensemble (its
        `members`, the number of its models) takes members=True for a fourth: each member's
        log-probabilities (B, T, V)."""

    def next_scores(self, states: torch.Tensor) -> torch.Tensor:
        """states (r, ...) -> next-token scores (r, V) whose argmax greedy takes."""

    def log_probs(self, scores: torch.Tensor) -> torch.Tensor:
        """next_scores' output -> float32 log-probabilities (r, V)."""

    def log_normalizer(self, scores: torch.Tensor) -> torch.Tensor:
        """float32 next_scores' output (r, V) -> (r,): log_probs(scores) is scores minus it."""

    def normalizer_entropy(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log_normalizer, and the entropy (r,) of each row's distribution (a trace's)."""

    def __call__(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher-forced next_scores for every position (B, T, V)."""


@dataclass
class Scores:
    """One step's next-token scores of the live rows (r, V), as a rule reads them."""

    logits: torch.Tensor  # the model's next_scores, whose argmax greedy takes
    model: Decodable
    floats: torch.Tensor | None = None  # the logits in float32 (maybe the logits themselves)
    norm: torch.Tensor | None = None  # (r,) floats less it are the log-probabilities

    def ranked(self) -> torch.Tensor:
        """Scores (r, V) in the logits' order for an argmax, the rule's to change in place:
        the float32 copy where a record made one (argmax would convert bf16 again), else the
        logits."""
        return self.logits if self.floats is None else self.floats

    def unnormalized(self) -> tuple[torch.Tensor, torch.Tensor]:
        """float32 scores (r, V) and the (r,) to subtract from each row for its
        log-probabilities (the record's, where it made them): the same ranking within a row,
        with no log-softmax written V wide. The scores may be the logits themselves (a float32
        model's), for the rule to change in place."""
        if self.norm is None:
            self.floats = self.logits.float()
            self.norm = self.model.log_normalizer(self.floats)
        return self.floats, self.norm

    def with_entropy(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """unnormalized's two, and each row's entropy (r,), in one pass over the scores (a
        trace's); unnormalized then gives the same two without computing them again."""
        self.floats = self.logits.float()
        self.norm, entropy = self.model.normalizer_entropy(self.floats)
        return self.floats, self.norm, entropy


@dataclass
class Moves:
    """What a rule decided at one step over the loop's live rows."""

    tokens: torch.Tensor  # (r',) the next token of each row that goes on
    moved: torch.Tensor | None = None  # (r',) the live row each extends; None: each row its own
    group: int | None = None  # rows per sentence after the move (cache.reorder's group)
    ended: torch.Tensor | None = None  # (e,) live rows that took <eos> now: hypotheses
    scores: list[float] | None = None  # (e) their scores
    held: list[bool] | None = None  # (e) whether each holds its terms (beam search's)


class Rule:
    """How a search picks each step's tokens: made by the loop for one batch, holding what it
    needs across steps; `step` is the one method a rule must have. `rows` (r,) name each live
    row's output slot, which is also its row in the constraints: a sentence (beam search), or
    a sentence's sample (`copies` rows per sentence, sentence-major)."""

    copies: int = 1  # rows per sentence at the start
    scored: ClassVar[bool] = False  # its hypotheses carry scores (else NaN until rescored)
    supports_terms: ClassVar[bool] = False  # keeps lexical constraints (SearchRequest.terms)
    # keeps each hypothesis's cross-attention as it goes (word alignments then need no
    # teacher-forced pass after the search)
    supports_attention: ClassVar[bool] = False

    def __init__(self, model: Decodable, request: SearchRequest, src_mask: torch.Tensor):
        self.model, self.cfg = model, request.cfg
        self.constraints = Constraints.of(request.cfg, src_mask, model.cfg.max_positions,
                                          request.prefix, self.copies, request.terms)

    @classmethod
    def wanted(cls, cfg: DecodeConfig) -> bool:
        """Whether cfg asks for this rule (mt.decoding.rules.pick)."""
        return False

    def step(self, t: int, scores: Scores, hyp: torch.Tensor, rows: torch.Tensor) -> Moves:
        """Step t: the live rows' next-token scores, their tokens so far hyp (r, t) and output
        slots rows (r,) -> what ends, what goes on and with which token."""
        raise NotImplementedError

    def ranked(self, finished: list[list[Hypothesis]]) -> list[list[Hypothesis]]:
        """Each output slot's hypotheses -> each sentence's, best first: here the `copies`
        slots of a sentence in turn."""
        n = self.copies
        return [sum(finished[i: i + n], []) for i in range(0, len(finished), n)]


@torch.no_grad()
def search(model: Decodable, request: SearchRequest, rule: type[Rule]
           ) -> list[list[Hypothesis]]:
    """request's batch src (B, S) -> each sentence's hypotheses, as `rule` picks and ranks
    them, with what the request asks to record (attention, trace)."""
    src = request.src
    src_mask = model.src_mask(src)
    cache = model.start_cache(model.encode(src, src_mask) if request.memory is None
                              else request.memory, src_mask)
    picker = rule(model, request, src_mask)
    R, dev = src.size(0) * picker.copies, src.device
    rows = torch.arange(R, device=dev)  # each live row's output slot
    if picker.copies > 1:  # each copy its own row, sharing the sentence's encoder output
        cache = cache.reorder(rows // picker.copies, group=1)
    steps = int(picker.constraints.limits.max()) + 1
    cache = static(model, cache, request, steps)
    hyp = torch.empty(R, 0, dtype=torch.long, device=dev)  # (r, t) tokens so far
    prev = torch.full((R, 1), start_id(model.cfg.decoder_start), dtype=torch.long, device=dev)
    record = Recorder.start(model, R, src.size(1), dev, request.attention, request.trace)
    finished: list[list[Hypothesis]] = [[] for _ in range(R)]
    for t in range(steps):
        logits, cache, layers, members = step(model, prev, cache, record.weights, record.members)
        scores = Scores(logits, model)
        record.step(scores, layers, members)
        moves = picker.step(t, scores, hyp, rows)
        if moves.ended is not None:
            _finish(finished, moves, hyp, rows, record)
        if moves.moved is not None:
            if moves.moved.numel() == 0:
                break
            cache = cache.reorder(moves.moved, group=moves.group)
            hyp, rows = hyp.index_select(0, moves.moved), rows[moves.moved]
        record.move(moves.moved, moves.tokens)
        prev = moves.tokens[:, None]
        hyp = torch.cat([hyp, prev], dim=1)
    return picker.ranked(finished)


def _finish(finished: list[list[Hypothesis]], moves: Moves, hyp: torch.Tensor,
            rows: torch.Tensor, record: Recorder) -> None:
    """The hypotheses of the rows that ended (moves.ended), each added to its output slot."""
    ended = moves.ended
    held = [True] * len(moves.scores) if moves.held is None else moves.held
    attention, traces = record.ended(ended)
    for slot, tokens, score, h, a, tr in zip(rows[ended].tolist(), hyp[ended].tolist(),
                                             moves.scores, held, attention, traces,
                                             strict=True):
        finished[slot].append(Hypothesis(tokens, score, h, a, tr))
