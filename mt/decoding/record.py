"""What a search records of each output as it goes (SearchRequest.attention and .trace), so that
word alignments and the confidence features need no second, teacher-forced pass: the loop
(mt.decoding.search) calls its Recorder once per step.

Attention: each hypothesis's cross-attention, the step that chose each token a row (beam
search keeps it for word alignments). Trace, what mt.confidence reads:
per step of an output (each token, then <eos>), the model's log-probability of the token taken
(its logit less the row's logsumexp) and the entropy of its whole next-token distribution,
both before the search's constraints (mt.decoding.constraints never change the score of a
token they let through, so the first is the score the search used); the cross-attention of
that step (decoder layers and heads averaged), summed over the steps per source position;
and, for an ensemble, each member's log-probability of the tokens taken, summed. These are
the quantities a teacher-forced pass of the output computes (mt.confidence.features):
tests/test_decoding_record.py checks that they agree.

Shapes: r live rows of a search (sentences, samples or beams), t steps so far, S source
positions (padded), V vocabulary, M ensemble members.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mt.kernels import extend
from mt.vocab import EOS


@dataclass
class Trace:
    """One output's record (mt.decoding.request.Hypothesis.trace)."""

    logprobs: list[float]  # each token's log-probability, <eos> last
    entropy: list[float]  # the entropy (nats) of the distribution each was chosen from
    received: list[float]  # (S,) the attention each source position received, padding too
    members: list[float] | None = None  # an ensemble's: each member's summed log-probability


@dataclass
class Step:
    """What one step of a search gave its live rows, before they move or finish."""

    floats: torch.Tensor | None  # (r, V) the model's float32 scores (the taken tokens')
    norm: torch.Tensor | None  # (r,) floats less it are the log-probabilities
    entropy: torch.Tensor | None  # (r,) of the unconstrained distribution
    attention: torch.Tensor  # (r, S) layers and heads averaged
    members: list[torch.Tensor] | None = None  # an ensemble's: each member's (r, V)

    @classmethod
    def of(cls, scored: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
           layers: list[torch.Tensor], members: list[torch.Tensor] | None = None) -> Step:
        """A step's record from its float32 scores (r, V) before any constraint is applied
        (they may change in place afterwards, except where a token is taken), their
        normalizer and entropy (r,) each (scored), its decoder layers' cross-attention (r, H,
        1, S) each, and an ensemble's members' (r, 1, V) each. scored None: the attention
        alone (beam search's word alignments, untraced)."""
        last = [w[:, :, -1] for w in layers]  # (r, H, S) each
        if len({w.size(1) for w in last}) == 1:  # the mean of equal-sized means: one mean
            attention = torch.cat(last, 1).float().mean(1)
        else:  # an ensemble of models with different numbers of heads
            attention = torch.stack([w.float().mean(1) for w in last]).mean(0)
        members = None if members is None else [m[:, -1] for m in members]
        floats, norm, entropy = (None, None, None) if scored is None else scored
        return cls(floats, norm, entropy, attention, members)


@dataclass
class Traced:
    """The running record of a search's live rows: their tokens' log-probabilities and the
    entropies so far (r, t), the attention their source received (r, S), and an ensemble's
    members' summed log-probabilities (r, M). Never changed in place: `extend` gives the next."""

    logprobs: torch.Tensor
    entropy: torch.Tensor
    received: torch.Tensor
    members: torch.Tensor | None = None

    @classmethod
    def start(cls, rows: int, S: int, members: int, device: torch.device) -> Traced:
        """The record of `rows` empty outputs over S source positions; members: the ensemble's
        models (0 for one model)."""
        return cls(torch.zeros(rows, 0, device=device), torch.zeros(rows, 0, device=device),
                   torch.zeros(rows, S, device=device),
                   torch.zeros(rows, members, device=device) if members else None)

    def extend(self, index: torch.Tensor | None, step: Step, tokens: torch.Tensor) -> Traced:
        """The rows `index` (n,) of this step (a row may come twice: beams that share a
        prefix; None: each row its own, in order), each extended by the token it took (n,)."""
        def rows(x: torch.Tensor) -> torch.Tensor:
            return x if index is None else x[index]

        def picked(x: torch.Tensor) -> torch.Tensor:  # (n,) each row's taken token's score
            if index is None:
                return x.gather(1, tokens[:, None]).squeeze(1)
            return x[index, tokens]

        lp = picked(step.floats) - rows(step.norm)  # (n,)
        members = None
        if self.members is not None:  # (n, M)
            members = rows(self.members) + torch.stack([picked(m) for m in step.members], 1)
        return Traced(torch.cat([rows(self.logprobs), lp[:, None]], dim=1),
                      torch.cat([rows(self.entropy), rows(step.entropy)[:, None]], dim=1),
                      rows(self.received) + rows(step.attention), members)

    def traces(self) -> list[Trace]:
        """Each row's record, as plain lists."""
        members = ([None] * len(self.logprobs) if self.members is None
                   else self.members.tolist())
        return [Trace(lp, h, r, m) for lp, h, r, m in
                zip(self.logprobs.tolist(), self.entropy.tolist(), self.received.tolist(),
                    members, strict=True)]


@dataclass
class Recorder:
    """What the search loop keeps of its live rows (r), where asked: their cross-attention so
    far (r, t, S), moved with their tokens, and their Traced record. Each step: `step` before
    the rule, `ended` for the rows that finish, `move` for those that go on."""

    weights: bool  # the decoder gives its cross-attention (for attention or a trace)
    members: bool  # an ensemble gives each member's log-probabilities (for a trace)
    seen: torch.Tensor | None = None  # (r, t, S) with attention
    traced: Traced | None = None  # with a trace
    last: Step | None = None  # this step's

    @classmethod
    def start(cls, model, rows: int, S: int, device: torch.device, attention: bool,
              trace: bool) -> Recorder:
        """The empty record of `rows` rows of a search over S source positions with `model`
        (an ensemble's `members` are traced each)."""
        traced = Traced.start(rows, S, getattr(model, "members", 0), device) if trace else None
        seen = torch.empty(rows, 0, S, device=device) if attention else None
        return cls(attention or trace, trace and traced.members is not None, seen, traced)

    def step(self, scores, layers: list | None, members: list | None) -> None:
        """Record this step from the model's next-token scores (mt.decoding.search.Scores;
        a trace takes their normalizer with the entropy, for the rule too), its decoder
        layers' cross-attention and an ensemble's members', before a rule changes the
        scores."""
        if layers is None:
            return
        scored = scores.with_entropy() if self.traced is not None else None
        self.last = Step.of(scored, layers, members)

    def ended(self, rows: torch.Tensor) -> tuple[list, list]:
        """The rows (e,) that take <eos> now -> each one's attention (t, S) and Trace, None
        for what is not recorded."""
        n = len(rows)
        attention = [None] * n if self.seen is None else self.seen.index_select(0, rows)
        if self.traced is None:
            return attention, [None] * n
        eos = torch.full_like(rows, EOS)
        return attention, self.traced.extend(rows, self.last, eos).traces()

    def move(self, moved: torch.Tensor | None, tokens: torch.Tensor) -> None:
        """The next rows: each extends the live row moved (r',) (None: each its own, all
        going on) by its token (r',)."""
        if self.seen is None and self.traced is None:
            return
        if self.seen is not None:  # moved None: nothing to pick, the rows as they are
            now = (self.last.attention if moved is None
                   else self.last.attention.index_select(0, moved))
            self.seen = extend(self.seen, moved, now[:, None], 1)
        if self.traced is not None:
            self.traced = self.traced.extend(moved, self.last, tokens)
