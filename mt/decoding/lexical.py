"""Lexically constrained beam search: target terms (a glossary's, mt.glossary) that every
output must hold, as the beam rule of mt.decoding.rules runs it.

The method is the vectorized dynamic beam allocation of Hu et al. (NAACL 2019), the batched
form of Post and Vilar (2018). Each step, besides the 2K best continuations, every live beam
proposes the next token of each term it may work on and its own best token; each candidate is
put in the bank of how many term tokens it has met, and the K beams are dealt to the banks in
turn, highest bank first, the best of each bank before the second best of any. So hypotheses
that have met more of the terms keep places in the beam against better-scored ones that met
fewer, and <eos> is allowed only once every term is met (or at the length limit, which
`Constraints.of` grows to hold the terms: then a line can miss a term, and says so).

Where a hypothesis stands is the terms it has met and its last L tokens: a term is met when the
hypothesis ends with it, and the tokens it ends with that begin an unmet term are how far that
term has come (a token that breaks it loses that, and the term can start again later).
Unordered terms may be met in any order, overlapping one another ("New York" holds "York");
ordered ones one after the other, in the order given, none sharing a token with the one before.

Shapes: B sentences, C terms (padded: length 0), L tokens of the longest term, r rows (a
sentence's beams, flat), k live beams per sentence, K the beam, V the vocabulary, N candidates.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

NONE = -1  # no term in progress; no token wanted


@dataclass
class TermState:
    """Where each row (r,) stands: its sentence, the terms it has met (r, C) and its last L
    tokens (r, L), -1 before its first (and, ordered, up to the end of its last term met)."""

    sent: torch.Tensor  # (r,)
    met: torch.Tensor  # (r, C) bool; padding terms are met from the start
    tail: torch.Tensor  # (r, L)

    def index(self, i: torch.Tensor) -> TermState:
        return TermState(self.sent[i], self.met[i], self.tail[i])

    @property
    def complete(self) -> torch.Tensor:
        """(r,) bool: every term met, so the row may end."""
        return self.met.all(-1)


@dataclass
class Terms:
    """The terms each sentence's output must hold: ids (B, C, L) padded with -1, lengths
    (B, C) (0 for padding), ordered: met only in the order given; blocked (B, C, M) padded
    with -1, or None: the tokens no row of the sentence may write (mt.own_words)."""

    ids: torch.Tensor
    lengths: torch.Tensor
    ordered: bool = False
    blocked: torch.Tensor | None = None

    @classmethod
    def of(cls, terms: list[list[list[int]]], ordered: bool, device: torch.device | str,
           blocked: list[list[list[int]]] | None = None) -> Terms | None:
        """Per sentence, its terms' target ids (and the ids each blocks) -> Terms; None when
        no sentence has one (the search is then the unconstrained one, exactly). A term given
        twice is held once (blocking what both block)."""
        per: list[dict[tuple, set]] = []
        for b, sentence in enumerate(terms):
            per.append({})
            for c, term in enumerate(sentence):
                per[-1].setdefault(tuple(term), set()).update(blocked[b][c] if blocked else ())
        C = max((len(t) for t in per), default=0)
        if C == 0:
            return None
        L = max(len(term) for t in per for term in t)
        M = max((len(x) for t in per for x in t.values()), default=0)
        ids = torch.full((len(per), C, L), NONE, dtype=torch.long)
        lengths = torch.zeros(len(per), C, dtype=torch.long)
        block = torch.full((len(per), C, M), NONE, dtype=torch.long)
        for b, sentence in enumerate(per):
            for c, (term, own) in enumerate(sentence.items()):
                ids[b, c, : len(term)] = torch.tensor(term, dtype=torch.long)
                lengths[b, c] = len(term)
                block[b, c, : len(own)] = torch.tensor(sorted(own), dtype=torch.long)
        return cls(ids.to(device), lengths.to(device), ordered, block.to(device) if M else None)

    def block(self, scores: torch.Tensor, st: TermState) -> torch.Tensor:
        """In place on the next-token scores (r, V) of rows in states st: -inf for the tokens
        their sentence's terms block."""
        if self.blocked is None:
            return scores
        own = self.blocked[st.sent]  # (r, C, M)
        row, c, m = (own >= 0).nonzero().unbind(-1)
        scores[row, own[row, c, m]] = float("-inf")
        return scores

    def tokens(self) -> torch.Tensor:
        """(B,) the term tokens each sentence's output must hold."""
        return self.lengths.sum(-1)

    def start(self, sent: torch.Tensor) -> TermState:
        """The state of empty hypotheses of the sentences sent (r,)."""
        tail = torch.full((sent.size(0), self.ids.size(2)), NONE, dtype=torch.long,
                          device=sent.device)
        return TermState(sent, self.lengths[sent] == 0, tail)

    def _open(self, st: TermState) -> torch.Tensor:
        """(r, C) bool: the terms a row may work on (unmet; ordered: the first unmet only)."""
        free = ~st.met
        return free & (free.cumsum(-1) == 1) if self.ordered else free

    def _matched(self, st: TermState) -> torch.Tensor:
        """(r, C, L + 1) bool: whether the row's last p tokens are the first p of each term,
        for p = 0..L (p = 0 always; p past a term's length never)."""
        ids, lens = self.ids[st.sent], self.lengths[st.sent]  # (r, C, L), (r, C)
        L = ids.size(2)
        out = [torch.ones_like(st.met)]
        for p in range(1, L + 1):
            same = (st.tail[:, None, L - p:] == ids[:, :, :p]).all(-1)  # (r, C)
            out.append(same & (p <= lens))
        return torch.stack(out, dim=-1)

    def _partial(self, st: TermState) -> torch.Tensor:
        """(r, C) how far each open term has come: the longest p < its length matched."""
        matched = self._matched(st)
        p = torch.arange(matched.size(-1), device=matched.device)
        short = p < self.lengths[st.sent][:, :, None]
        return torch.where(matched & short, p, 0).amax(-1) * self._open(st)

    def progress(self, st: TermState) -> torch.Tensor:
        """(r,) term tokens met, and those of the term furthest on: the bank of a hypothesis."""
        done = (st.met * self.lengths[st.sent]).sum(-1)
        return done + self._partial(st).amax(-1)

    def wanted(self, st: TermState) -> torch.Tensor:
        """(r, C) the token that would take each open term one further, -1 for the others."""
        nxt = self.ids[st.sent].gather(2, self._partial(st)[:, :, None]).squeeze(2)
        return torch.where(self._open(st), nxt, NONE)

    def advance(self, st: TermState, tok: torch.Tensor) -> TermState:
        """The state of each row (r,) after it takes tok (r,)."""
        tail = torch.cat([st.tail[:, 1:], tok[:, None]], dim=1)
        moved = TermState(st.sent, st.met, tail)
        lens = self.lengths[st.sent]
        ends = self._matched(moved).gather(2, lens[:, :, None]).squeeze(2) & self._open(st)
        met = st.met | ends
        if self.ordered:  # the next term starts after this one
            tail = tail.masked_fill(ends.any(-1, keepdim=True), NONE)
        return TermState(st.sent, met, tail)

    def step(self, lprobs: torch.Tensor, scores: torch.Tensor, st: TermState,
             best: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, TermState]:
        """The constrained search rule: lprobs (b, k, V), scores (b, k) of the live beams and
        their states st (b*k rows), best: beam_step's 2K best (scores, tokens, beams), each
        (b, 2K) -> every candidate's (scores, tokens, beams), each (b, N), in the order the
        beam takes them, and their states (b*N rows, in that order). Only the sums scores +
        lprobs are read: a beam's unnormalized scores with its normalizer taken from its score
        do as well (beam_step's too).

        A sentence without terms (every candidate in bank 0) gets beam_step's order: what it
        adds ranks below its 2K best, which hold the K that the search keeps."""
        b, k, V = lprobs.shape
        C, dev = st.met.size(1), lprobs.device
        want = self.wanted(st).view(b, k * C)  # (b, k*C) next term tokens, -1: none
        want_beams = torch.arange(k, device=dev).repeat_interleave(C).expand(b, -1)
        picked = lprobs.gather(2, want.clamp(min=0).view(b, k, C)).view(b, -1)
        want_scores = torch.where(want >= 0, scores.gather(1, want_beams) + picked,
                                  float("-inf"))
        own_scores, own = lprobs.max(-1)  # (b, k) each beam's best token
        top = torch.cat([best[0], want_scores, scores + own_scores], dim=1)  # (b, N)
        tokens = torch.cat([best[1], want.clamp(min=0), own], dim=1)
        beams = torch.cat([best[2], want_beams, torch.arange(k, device=dev).expand(b, -1)], 1)
        N = top.size(1)
        # a candidate proposed twice counts once: the first (beam_step's) is kept
        sk, order = (beams * V + tokens).sort(dim=-1, stable=True)
        dup = torch.cat([torch.zeros_like(sk[:, :1], dtype=torch.bool),
                         sk[:, 1:] == sk[:, :-1]], dim=1)
        top = top.scatter(1, order, top.gather(1, order).masked_fill(dup, float("-inf")))
        rows = (torch.arange(b, device=dev)[:, None] * k + beams).flatten()
        cand = self.advance(st.index(rows), tokens.flatten())  # b*N rows
        bank = self.progress(cand).view(b, N)
        # Deal the beam to the banks: sorted by score, then by bank (stable), each candidate's
        # rank inside its bank; then rank 0 of every bank (highest first), rank 1, ...
        order = top.sort(dim=-1, descending=True, stable=True).indices
        order = order.gather(1, bank.gather(1, order).sort(dim=-1, descending=True,
                                                           stable=True).indices)
        sb = bank.gather(1, order)
        at = torch.arange(N, device=dev).expand(b, -1)
        new_bank = torch.cat([torch.ones_like(sb[:, :1], dtype=torch.bool),
                              sb[:, 1:] != sb[:, :-1]], dim=1)
        rank = at - torch.where(new_bank, at, 0).cummax(-1).values
        banks = int(bank.max()) + 1
        turn = rank * banks + (banks - 1 - sb)
        turn = turn.masked_fill(~top.gather(1, order).isfinite(), (N + 1) * banks)  # last
        order = order.gather(1, turn.sort(dim=-1, stable=True).indices)
        flat = (torch.arange(b, device=dev)[:, None] * N + order).flatten()
        return (top.gather(1, order), tokens.gather(1, order), beams.gather(1, order),
                cand.index(flat))
