"""What no search may choose freely, in one place (Constraints): greedy, sampling and beam
search all call `Constraints.apply` on every step's scores. Their length limits (each
sentence's budget a * src_len + b) and forced target prefixes are here too.

Shapes: r rows of a search (sentences, samples or beams), t steps so far, V vocab, P prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mt.config import DecodeConfig
from mt.decoding.lexical import Terms, TermState
from mt.vocab import EOS, PAD, UNK


def max_lengths(src_mask: torch.Tensor, a: float, b: int, limit: int) -> torch.Tensor:
    """Per-sentence output budget a * src_len + b, capped so positions fit the model: (B,)."""
    src_len = src_mask.reshape(src_mask.size(0), -1).sum(-1)
    return (a * src_len + b).long().clamp(min=1, max=limit - 1)


def _forbid(scores: torch.Tensor, t: int, min_len: int) -> torch.Tensor:
    """In place on next-token scores (n, V) at step t: never <pad>, no <eos> before min_len."""
    scores[:, PAD] = float("-inf")
    if t < min_len:
        scores[:, EOS] = float("-inf")
    return scores


def block_repeats(scores: torch.Tensor, hyp: torch.Tensor, n: int) -> torch.Tensor:
    """In place on next-token scores (r, V) after the tokens so far hyp (r, t): -inf for every
    token that would complete an n-gram the row already holds (n = decode.no_repeat_ngram;
    0 is off). The n-grams are those whose first n - 1 tokens are the row's last n - 1."""
    t = hyp.size(1)
    if n <= 0 or t < n:
        return scores
    grams = hyp.unfold(1, n, 1)  # (r, t - n + 1, n) every n-gram so far
    seen = (grams[:, :, :-1] == hyp[:, None, t - n + 1:]).all(-1)  # (r, W) same first n - 1
    row, at = seen.nonzero().unbind(-1)
    scores[row, grams[row, at, -1]] = float("-inf")
    return scores


def forced(prefix: torch.Tensor | None, rows: torch.Tensor, t: int) -> torch.Tensor | None:
    """The token each row (r,) of the prefix's sentences `rows` must take at step t, -1 where
    it is free; None when no row is forced (no prefix, or all are behind)."""
    if prefix is None or t >= prefix.size(1):
        return None
    tok = prefix[rows, t]
    return torch.where(tok == PAD, -1, tok)


def with_prefix(limits: torch.Tensor, prefix: torch.Tensor | None) -> torch.Tensor:
    """Length limits (B,) that hold each sentence's prefix: the prefix then <eos> at least."""
    return limits if prefix is None else torch.maximum(limits, (prefix != PAD).sum(1))


@dataclass
class Constraints:
    """What a search may not choose freely, in one place: greedy, sampling and beam search
    call `apply` on every step's scores. Per row of the search (a sentence, a sample or a
    beam): no <unk> where decode.unk forbids it (but in a term that holds one: a word the
    vocabulary lacks), none of the words its terms block (mt.own_words), no <eos> before
    min_len, no repeated n-gram (no_repeat_ngram), no <eos> before its terms are met (beam
    search with terms), <eos> and nothing else at its length limit, and inside a forced
    prefix its token and nothing else, scored as the model scores it. A new constraint is a
    field here and a few lines in `apply`.

    limits (R,): each row's length limit (with_prefix, and the terms' tokens), prefix (R, P)
    or None; `rows` in apply index them. terms: what beam search must hold (mt.decoding.lexical).
    no_unk (R,) bool: the rows that may not write <unk>; None: all may.
    """

    limits: torch.Tensor
    prefix: torch.Tensor | None = None
    min_len: int = 0
    no_repeat_ngram: int = 0
    terms: Terms | None = None
    no_unk: torch.Tensor | None = None

    def __post_init__(self):
        self.first_limit = int(self.limits.min())  # no row must end before this step

    @classmethod
    def of(cls, cfg: DecodeConfig, src_mask: torch.Tensor, max_positions: int,
           prefix: torch.Tensor | None = None, copies: int = 1, terms: Terms | None = None
           ) -> Constraints:
        """The constraints of a batch src (B, S) searched with cfg: one row per sentence, or
        `copies` consecutive rows (samples) per sentence."""
        limits = with_prefix(max_lengths(src_mask, cfg.max_len_a, cfg.max_len_b, max_positions),
                             prefix)
        if terms is not None:  # room for the prefix and every term after it
            held = 0 if prefix is None else (prefix != PAD).sum(1)
            limits = torch.maximum(limits, held + terms.tokens()).clamp(max=max_positions - 1)
        no_unk = None
        if cfg.unk == "forbid":
            no_unk = torch.ones_like(limits, dtype=torch.bool)
            if terms is not None:
                no_unk &= ~(terms.ids == UNK).flatten(1).any(1)
        if copies > 1:
            limits = limits.repeat_interleave(copies)
            prefix = None if prefix is None else prefix.repeat_interleave(copies, 0)
            no_unk = None if no_unk is None else no_unk.repeat_interleave(copies)
        return cls(limits, prefix, cfg.min_len, cfg.no_repeat_ngram, terms, no_unk)

    def apply(self, scores: torch.Tensor, t: int, hyp: torch.Tensor, rows: torch.Tensor,
              state: TermState | None = None) -> torch.Tensor:
        """Next-token scores (r, V) (logits or log-probabilities; changed in place where it can)
        of the rows `rows` (r,) at step t, after their tokens hyp (r, t) (and where they stand
        on the terms, with terms) -> the scores the search may choose from: -inf for what it
        may not."""
        want = forced(self.prefix, rows, t)  # (r,) or None
        if want is not None:  # the forced tokens' scores, before the constraints change them
            kept = scores.gather(1, want.clamp(min=0)[:, None])  # (r, 1)
        eos = scores[:, EOS].clone() if t >= self.first_limit else None
        scores = block_repeats(_forbid(scores, t, self.min_len), hyp, self.no_repeat_ngram)
        if self.no_unk is not None:
            scores[:, UNK] = scores[:, UNK].masked_fill(self.no_unk[rows], float("-inf"))
        if state is not None:  # no end before the terms (the length limit below still wins)
            scores[:, EOS] = scores[:, EOS].masked_fill(~state.complete, float("-inf"))
            scores = self.terms.block(scores, state)
        # Only the rows concerned are rewritten, not every row at every step.
        if eos is not None:  # rows at their limit must end now: <eos> (even before min_len)
            end = (self.limits[rows] <= t).nonzero().squeeze(1)
            if end.numel():
                scores[end] = float("-inf")
                scores[end, EOS] = eos[end]
        if want is not None:  # a row inside its prefix has one candidate (limits hold it)
            inside = (want >= 0).nonzero().squeeze(1)
            if inside.numel():
                scores[inside] = float("-inf")
                scores[inside, want[inside]] = kept[inside, 0]
        return scores


