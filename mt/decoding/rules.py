"""The search rules that the loop (mt.decoding.search) runs: greedy, sampling and beam search,
and RULES, their registry. A new search is one Rule subclass and one line in RULES; `pick`
gives a DecodeConfig the last registered rule that wants it.

Beam search keeps 2K candidates per sentence so that finished hypotheses never starve the
beam, and stops a sentence when its n-best list is final (`_done`). With target terms
(mt.decoding.lexical) it is lexically constrained: no <eos> before every term is met, and the
beam dealt among hypotheses by how much of the terms they hold.

Shapes: B batch (b: sentences still running), V vocab, K beam (k: live beams per sentence, 1 at
the first step, then K), r live rows.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mt.config import DecodeConfig
from mt.decoding.request import Hypothesis, SearchRequest
from mt.decoding.sampling import draw, uniforms
from mt.decoding.scores import length_penalty
from mt.decoding.search import CHUNK, Decodable, Moves, Rule, Scores
from mt.vocab import EOS, PAD


def chunk_maxima(scores: torch.Tensor) -> torch.Tensor:
    """scores (n, V) -> (n, C) the maximum of each chunk of CHUNK columns, the last chunk short
    when V % CHUNK (C = ceil(V / CHUNK))."""
    n, V = scores.shape
    whole = V - V % CHUNK
    maxima = scores[:, :whole].view(n, -1, CHUNK).amax(-1)  # (n, V // CHUNK)
    if whole < V:
        maxima = torch.cat([maxima, scores[:, whole:].amax(-1, keepdim=True)], dim=1)
    return maxima


def argmax(scores: torch.Tensor) -> torch.Tensor:
    """scores (n, V) -> (n,) the first index of each row's maximum, as `scores.argmax(-1)`.

    torch's CPU argmax does not vectorise over a row, while a row maximum does, and over
    vocabulary-sized rows the difference shows in greedy's speed (benchmarks/bench_decode.py).
    So: the maxima of chunks of CHUNK, the first chunk holding the row's maximum, then the
    first maximum inside that chunk (same result, ties included).
    """
    V = scores.size(1)
    if scores.device.type != "cpu" or V < 4 * CHUNK:
        return scores.argmax(-1)
    if scores.dtype == torch.bfloat16:  # torch's CPU reductions are slower in bf16 than one
        scores = scores.float()         # conversion and the float32 reductions (exact)
    first = chunk_maxima(scores).argmax(-1)  # (n,) the first chunk that holds the maximum
    cols = (first[:, None] * CHUNK + torch.arange(CHUNK, device=scores.device)).clamp(max=V - 1)
    inside = scores.gather(1, cols).argmax(-1, keepdim=True)  # clamped repeats come after V - 1
    return cols.gather(1, inside).squeeze(1)


class Greedy(Rule):
    """Each row's best token, the argmax of the model's logits (no log-softmax needed); its
    hypotheses are unscored (the engine rescores them when scores are shown). Every config
    wants it: the fallback when no other rule does."""

    supports_attention = True

    @classmethod
    def wanted(cls, cfg: DecodeConfig) -> bool:
        return True

    def choose(self, scores: torch.Tensor, rows: torch.Tensor, t: int) -> torch.Tensor:
        """scores (r, V) after the constraints, rows (r,) their slots, step t -> tokens (r,)."""
        return argmax(scores)

    def step(self, t: int, scores: Scores, hyp: torch.Tensor, rows: torch.Tensor) -> Moves:
        tok = self.choose(self.constraints.apply(scores.ranked(), t, hyp, rows), rows, t)
        done = tok == EOS
        if not done.any():  # nothing moves: no reorder
            return Moves(tok)
        ended, keep = done.nonzero().flatten(), (~done).nonzero().flatten()
        return Moves(tok[keep], keep, ended=ended, scores=[float("nan")] * len(ended))


class Sample(Greedy):
    """decode.sampling topk or topp: decode.samples rows per sentence (in turn), each token
    drawn (mt.decoding.sampling.draw) from two uniforms per step of the row's own generator,
    seeded by its source line and number: so an output depends on decode.seed, its source
    line, its number and the model's logits only."""

    def __init__(self, model: Decodable, request: SearchRequest, src_mask: torch.Tensor):
        self.copies = request.cfg.samples
        super().__init__(model, request, src_mask)
        # (B * samples, steps, 2), up to each sentence's length limit (its copies share it)
        self.uniforms = uniforms(request.src, request.cfg,
                                 self.constraints.limits[::self.copies])

    @classmethod
    def wanted(cls, cfg: DecodeConfig) -> bool:
        return cfg.sampling != "none"

    def choose(self, scores: torch.Tensor, rows: torch.Tensor, t: int) -> torch.Tensor:
        return draw(scores, self.cfg, self.uniforms[rows, t])


class Beam(Rule):
    """Beam search: up to decode.nbest distinct hypotheses per sentence, best first. The flat
    batch holds K rows per running sentence (one at the first step, where all K beams would be
    the same empty prefix); each step ranks the k*V candidates (`beam_step`, then `Terms.step`
    with terms) and moves the beams, dropping the sentences that are done. With a prefix, the
    forced token is a beam's only candidate, so the beams behind a prefix are one live beam
    and impossible ones; with terms, each hypothesis holds its sentence's terms unless the
    length limit cut it short."""

    scored = supports_terms = supports_attention = True

    def __init__(self, model: Decodable, request: SearchRequest, src_mask: torch.Tensor):
        super().__init__(model, request, src_mask)
        cfg, B, dev = request.cfg, request.src.size(0), request.src.device
        self.K, self.n, self.V = cfg.beam, min(cfg.nbest, cfg.beam), model.vocab_size
        self.sents = torch.arange(B, device=dev)  # (b,) the sentence of each running one
        # (b*k rows, then b*N candidates) where each beam stands on the terms
        self.state = None if request.terms is None else request.terms.start(self.sents)
        self.scores = torch.zeros(B, 1, device=dev)  # (b, k) log-probs of the live beams
        self.kept = torch.full((B, self.n), float("-inf"), device=dev)  # (b, n) best finished

    @classmethod
    def wanted(cls, cfg: DecodeConfig) -> bool:
        return cfg.beam > 1

    def step(self, t: int, scores: Scores, hyp: torch.Tensor, rows: torch.Tensor) -> Moves:
        b, k = self.scores.shape
        # a row's log-probabilities are its scores less one number: rank the scores with that
        # number taken from the beam's score instead (no log-softmax written, V wide)
        z, norm = scores.unnormalized()
        base = self.scores - norm.view(b, k)
        z = self.constraints.apply(z, t, hyp, rows, self.state).view(b, k, self.V)
        best = beam_step(z, base, self.K)  # (b, 2K) each
        if self.state is not None:  # (b, N) each, in the order the banks deal them
            *best, self.state = self.constraints.terms.step(z, base, self.state, best)
        top, tokens, beams = best
        moves = self._ends(t, top, tokens, beams, k)
        # the K best candidates that do not end stay live, best first (with terms: the first
        # K in the order the banks deal them)
        N = top.size(1)
        order = torch.arange(N, device=top.device) + (tokens == EOS) * N
        live = order.topk(self.K, dim=-1, largest=False).indices  # (b, K)
        self.scores, tokens, beams = (x.gather(1, live) for x in (top, tokens, beams))
        # sentences that are done leave the batch
        done = _done(t, self.constraints.limits[self.sents], self.kept[:, -1],
                     self.scores.amax(-1), self.cfg.length_norm, self.cfg.length_penalty)
        keep = (~done).nonzero().flatten()  # (b',) sentences that go on
        moves.moved = (keep[:, None] * k + beams[keep]).flatten()  # (b'*K,) rows extended
        moves.tokens, moves.group = tokens[keep].flatten(), self.K
        self.sents, self.scores, self.kept = self.sents[keep], self.scores[keep], self.kept[keep]
        if self.state is not None:
            self.state = self.state.index((keep[:, None] * N + live[keep]).flatten())
        return moves

    def _ends(self, t: int, top: torch.Tensor, tokens: torch.Tensor, beams: torch.Tensor,
              k: int) -> Moves:
        """The candidates (b, N) ranked in the top K that end in <eos> finish: their rows
        and scores (Moves without its next tokens), kept in the n best finished scores."""
        ends = (tokens == EOS) & top.isfinite()
        ends[:, self.K:] = False
        if not ends.any():
            return Moves(tokens)
        final = torch.where(ends, top / length_penalty(t + 1, self.cfg.length_norm,
                                                       self.cfg.length_penalty), float("-inf"))
        self.kept = torch.cat([self.kept, final], dim=1).topk(self.n, dim=-1).values
        sent, rank = ends.nonzero().unbind(-1)
        held = (None if self.state is None else  # the candidates' states
                self.state.complete[sent * top.size(1) + rank].tolist())
        return Moves(tokens, ended=sent * k + beams[sent, rank],
                     scores=final[sent, rank].tolist(), held=held)

    def ranked(self, finished: list[list[Hypothesis]]) -> list[list[Hypothesis]]:
        """Those that hold their terms first (the others ended at the length limit), then by
        score; the n best."""
        return [sorted(f, key=lambda h: (not h.held, -h.score))[: self.n] for f in finished]


# The search rules by name; `pick` takes the last one whose `wanted` says yes.
RULES: dict[str, type[Rule]] = {"greedy": Greedy, "sample": Sample, "beam": Beam}


def pick(cfg: DecodeConfig) -> type[Rule]:
    """The rule cfg asks for: beam search when decode.beam > 1, else sampling when
    decode.sampling is set, else greedy (and a rule registered later wins where it wants
    cfg)."""
    return next(rule for rule in reversed(RULES.values()) if rule.wanted(cfg))


def _done(t: int, limits: torch.Tensor, nth_best: torch.Tensor, best_live: torch.Tensor,
          norm: str, alpha: float) -> torch.Tensor:
    """Which sentences stop after step t: (b,) from limits, the score of the n-th best finished
    hypothesis (-inf while fewer) and the log-probability of the best live beam, each (b,).

    A sentence stops at its length limit, or when no live beam can enter its n-best list any
    more. Log-probabilities only decrease, so a live beam of log-probability L <= 0 at best
    finishes with no further loss at the length m (t + 2 <= m <= limit + 1, <eos> counted)
    where lp(m) is largest: its score is at most L / max(lp(t + 2), lp(limit + 1)), lp being
    monotone. Other live beams have a lower L, so once that bound cannot beat the n-th best,
    nothing finishing later can, and the list is final. (Bounding by lp(t + 2) alone, as if
    the beam had to end now, is not safe when lp grows with length.)
    """
    best_lp = length_penalty(limits + 1, norm, alpha).clamp(min=length_penalty(t + 2, norm, alpha))
    return (limits <= t) | (nth_best >= best_live / best_lp)


def beam_step(lprobs: torch.Tensor, scores: torch.Tensor, K: int
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The search rule: lprobs (b, k, V) next-token log-probs, scores (b, k) of the live beams
    -> the 2K best continuations per sentence as (scores, tokens, beams), each (b, 2K), best first.

    All live beams have the same length, so ranking by raw log-probability is ranking by
    penalised score. 2K candidates leave K that do not end even if K of them end in <eos>.
    (k is 1 at the first step, when every sentence has one beam: the empty one.) Only the sums
    scores + lprobs are ranked: unnormalized scores, each row's normalizer taken from its
    beam's score, give the same candidates (Beam.step).
    """
    b, k, V = lprobs.shape
    n = min(2 * K, k * V)
    if k * V < 2 * K * CHUNK:
        top, flat = (scores[:, :, None] + lprobs).view(b, k * V).topk(n, dim=-1)
        if n < 2 * K:  # one beam over fewer than 2K words: pad with impossible candidates
            top = F.pad(top, (0, 2 * K - n), value=float("-inf"))
            flat = F.pad(flat, (0, 2 * K - n), value=PAD)
        return top, flat % V, flat // V
    # torch's CPU topk over all k*V candidates is slow enough to show in beam search's speed
    # (benchmarks/bench_decode.py). Each of the 2K best lies in one of the 2K chunks with the
    # largest maxima (else 2K chunk maxima beat it), so the search ranks chunk maxima, then
    # the members of those 2K chunks only: same result. The chunks are each beam's own (its
    # last one short when V % CHUNK), so a beam's score is added to its chunk maxima and to
    # the members taken, never to all k*V log-probabilities: max(lp + s) is max(lp) + s, as
    # float rounding is monotone.
    rows = lprobs.view(b * k, V)
    maxima = chunk_maxima(rows)  # (b*k, C)
    C = maxima.size(1)
    best = (maxima.view(b, k, C) + scores[:, :, None]).view(b, k * C).topk(2 * K, dim=-1).indices
    beam, chunk = best // C, best % C  # (b, 2K) each
    cols = chunk[:, :, None] * CHUNK + torch.arange(CHUNK, device=lprobs.device)  # (b, 2K, CHUNK)
    members = rows[(torch.arange(b, device=lprobs.device)[:, None] * k + beam)[:, :, None],
                   cols.clamp(max=V - 1)]
    members = members.masked_fill(cols >= V, float("-inf"))  # past the short chunk's end
    members = members + scores.gather(1, beam)[:, :, None]
    top, at = members.view(b, -1).topk(2 * K, dim=-1)
    tokens = cols.view(b, -1).gather(1, at).clamp(max=V - 1)  # a past-the-end slot (-inf)
    return top, tokens, beam.gather(1, at // CHUNK)  # gets a real token


