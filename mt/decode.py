"""Search over the model's encode/decode interface: batched greedy, sampling and beam search,
KV-cached. Greedy and sampling share one loop (`incremental`), differing in how they pick each
next token (argmax, `draw`).

Shapes: B batch (b: sentences still running), S source length, T target length, V vocab, K beam.
(k: live beams per sentence, 1 at the first step, then K.)

Scores. A hypothesis of n tokens is scored by its log-probability L (the sum over its tokens
and the closing <eos>) divided by a length penalty lp(n + 1), the length counting <eos>:
    gnmt      ((5 + m) / 6) ** alpha      (Wu et al. 2016; alpha = decode.length_penalty)
    average   m                           (plain per-token average)
    none      1
Every lp is >= 1 and non-decreasing in m for alpha >= 0. Both searches emit <eos> no earlier
than `min_len` tokens and must emit it after `max_len_a * src_len + max_len_b` tokens. Like
greedy always did, none forbids other tokens but <pad>, which is never generated (a trained
model does not emit <bos> either; a Marian model, whose decoder starts from <pad>, might).
With decode.no_repeat_ngram n > 0, all three never complete an n-gram the output already holds.

A forced target prefix (B, P) (padded with PAD; a row of PAD: none) makes each search take the
prefix's tokens first, whatever the constraints above, and score them like any other: the
output starts with them. The length budget grows to hold the prefix if it must.

Target terms (mt.constrained.Terms, from a glossary) make beam search lexically constrained:
no <eos> before every term is met, and the beam dealt among hypotheses by how much of the
terms they hold (mt.constrained). The length budget grows to hold the prefix and the terms.

`model` is anything Decodable: a Seq2Seq, or several as one (mt.ensemble.Ensemble).

With `trace`, each search also records what mt.confidence reads of each output (mt.trace):
the tokens' log-probabilities and entropies, the attention each source position received and,
for an ensemble, each member's log-probability; a Hypothesis carries it as `trace`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch
import torch.nn.functional as F

from mt.config import LENGTH_NORMS, DecodeConfig, ModelConfig
from mt.constrained import Terms, TermState
from mt.trace import Step, Trace, Traced
from mt.vocab import EOS, PAD, start_id

CHUNK = 64  # scores per chunk, in beam_step and argmax


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

    def log_probs_entropy(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log_probs, and the entropy (r,) of each row's distribution (a trace's)."""

    def __call__(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher-forced next_scores for every position (B, T, V)."""


@dataclass
class Hypothesis:
    tokens: list[int]  # target ids without <bos>/<eos>
    score: float  # length-penalised log-probability (see the module docstring)
    held: bool = True  # holds its terms (mt.constrained); False only when the length limit cut it
    # (T, S): the cross-attention (layers and heads averaged) of the step that chose each
    # token, over the padded source; beam search gives it when asked (attend)
    attention: torch.Tensor | None = field(default=None, compare=False, repr=False)
    # what mt.confidence reads of it, recorded by the search when asked (trace)
    trace: Trace | None = field(default=None, compare=False, repr=False)


def length_penalty(length: torch.Tensor | int, norm: str, alpha: float) -> torch.Tensor | float:
    """lp(m) for hypotheses of m tokens, <eos> included; scores are log-probability / lp."""
    if norm == "gnmt":
        return ((5 + length) / 6) ** alpha
    if norm == "average":
        return length * 1.0
    if norm == "none":
        return length * 0.0 + 1.0  # a tensor for a tensor, like the others
    raise ValueError(f"unknown length normalisation {norm!r}; expected one of {LENGTH_NORMS}")


def max_lengths(src_mask: torch.Tensor, a: float, b: int, limit: int) -> torch.Tensor:
    """Per-sentence output budget a * src_len + b, capped so positions fit the model: (B,)."""
    src_len = src_mask.reshape(src_mask.size(0), -1).sum(-1)
    return (a * src_len + b).long().clamp(min=1, max=limit - 1)


def argmax(scores: torch.Tensor) -> torch.Tensor:
    """scores (n, V) -> (n,) the first index of each row's maximum, as `scores.argmax(-1)`.

    torch's CPU argmax does not vectorise over a row, while a row maximum does, and over
    vocabulary-sized rows the difference shows in greedy's speed (benchmarks/bench_decode.py).
    So: the maxima of chunks of CHUNK, the first chunk holding the row's maximum, then the
    first maximum inside that chunk (same result, ties included).
    """
    n, V = scores.shape
    if scores.device.type != "cpu" or V < 4 * CHUNK:
        return scores.argmax(-1)
    whole = V - V % CHUNK
    maxima = scores[:, :whole].view(n, -1, CHUNK).amax(-1)  # (n, V // CHUNK)
    if whole < V:
        maxima = torch.cat([maxima, scores[:, whole:].amax(-1, keepdim=True)], dim=1)
    first = maxima.argmax(-1)  # (n,) the first chunk that holds the maximum
    cols = (first[:, None] * CHUNK + torch.arange(CHUNK, device=scores.device)).clamp(max=V - 1)
    inside = scores.gather(1, cols).argmax(-1, keepdim=True)  # clamped repeats come after V - 1
    return cols.gather(1, inside).squeeze(1)


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
    beam): no <eos> before min_len, no repeated n-gram (no_repeat_ngram), no <eos> before its
    terms are met (beam search with terms), <eos> and nothing else at its length limit, and
    inside a forced prefix its token and nothing else, scored as the model scores it. A new
    constraint is a field here and a few lines in `apply`.

    limits (R,): each row's length limit (with_prefix, and the terms' tokens), prefix (R, P)
    or None; `rows` in apply index them. terms: what beam search must hold (mt.constrained).
    """

    limits: torch.Tensor
    prefix: torch.Tensor | None = None
    min_len: int = 0
    no_repeat_ngram: int = 0
    terms: Terms | None = None

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
        if copies > 1:
            limits = limits.repeat_interleave(copies)
            prefix = None if prefix is None else prefix.repeat_interleave(copies, 0)
        return cls(limits, prefix, cfg.min_len, cfg.no_repeat_ngram, terms)

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
        if state is not None:  # no end before the terms (the length limit below still wins)
            scores[:, EOS] = scores[:, EOS].masked_fill(~state.complete, float("-inf"))
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


# How the shared incremental loop picks each row's next token: (scores (r, V) after the
# constraints, rows (r,) the original row of each, step t) -> tokens (r,).
Choose = Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]
# What a model's encode gave for src, when the caller has it already (the Translator, which
# reads the same encoder output again for word alignments): the searches then skip encode.
Memory = Any


def _decode(model: Decodable, prev: torch.Tensor, cache: Any, weights: bool, members: bool
            ) -> tuple[torch.Tensor, Any, list | None, list | None]:
    """model.decode of the newest tokens prev (r, 1) -> (states, cache, each layer's
    cross-attention where `weights`, each member's log-probabilities where `members` (an
    ensemble's, for a trace)), None for what was not asked."""
    if members:
        return model.decode(prev, cache, need_weights=True, members=True)
    if weights:
        return (*model.decode(prev, cache, need_weights=True), None)
    return (*model.decode(prev, cache), None, None)


def _tracer(model: Decodable, rows: int, S: int, device: torch.device, trace: bool
            ) -> Traced | None:
    """The empty record of a search's rows, where traced."""
    return Traced.start(rows, S, getattr(model, "members", 0), device) if trace else None


@torch.no_grad()
def greedy(model: Decodable, src: torch.Tensor, cfg: DecodeConfig,
           prefix: torch.Tensor | None = None, memory: Memory | None = None,
           trace: bool = False) -> list[list[int]] | list[tuple[list[int], Trace]]:
    """src (B, S) -> for each sentence the argmax token ids, without <bos>/<eos> (after its
    prefix's, when one is forced); with trace, (ids, its Trace) for each.

    Greedy keeps its own loop (`incremental`, shared with sampling) rather than running beam
    search with K=1: it needs no log-softmax, no finished lists and no bound, and training
    validates with it.
    """
    return incremental(model, src, cfg, lambda scores, rows, t: argmax(scores), prefix=prefix,
                       memory=memory, trace=trace)


def incremental(model: Decodable, src: torch.Tensor, cfg: DecodeConfig, choose: Choose,
                copies: int = 1, prefix: torch.Tensor | None = None,
                memory: Memory | None = None, trace: bool = False
                ) -> list[list[int]] | list[tuple[list[int], Trace]]:
    """src (B, S) -> B * copies outputs (sentence-major: copies rows per sentence), one token
    per step picked by `choose` (greedy's argmax, a Sampler's draw) from what the Constraints
    leave; with trace, each with its Trace (mt.trace).

    The encoder runs once; each step feeds only the newest token and extends the cache.
    Finished rows leave the batch, so later steps cost only what is still running.
    """
    src_mask = model.src_mask(src)
    cache = model.start_cache(model.encode(src, src_mask) if memory is None else memory,
                              src_mask)
    constraints = Constraints.of(cfg, src_mask, model.cfg.max_positions, prefix, copies)
    B = src.size(0) * copies
    rows = torch.arange(B, device=src.device)  # original row of each live row
    if copies > 1:  # each copy its own row, sharing the sentence's encoder output
        cache = cache.reorder(rows // copies, group=1)
    out: list = [[] for _ in range(B)]
    hyp = torch.empty(B, 0, dtype=torch.long, device=src.device)  # (b, t) tokens so far
    prev = torch.full((B, 1), start_id(model.cfg.decoder_start), dtype=torch.long,
                      device=src.device)
    traced = _tracer(model, B, src.size(1), src.device, trace)
    for t in range(int(constraints.limits.max()) + 1):
        states, cache, layers, members = _decode(model, prev, cache, trace,
                                                 trace and traced.members is not None)
        scores = model.next_scores(states[:, -1])
        if traced is not None:  # before the constraints change the scores in place
            step = Step.of(model.log_probs_entropy(scores), layers, members)
        scores = constraints.apply(scores, t, hyp, rows)
        tok = choose(scores, rows, t)  # (b,)
        hyp = torch.cat([hyp, tok[:, None]], dim=1)
        if traced is not None:
            traced = traced.extend(torch.arange(len(tok), device=tok.device), step, tok)
        done = tok == EOS
        if done.any():
            ended = done.nonzero().flatten()
            ids = [hyp[i, :-1].tolist() for i in ended.tolist()]
            if traced is not None:
                ids = list(zip(ids, traced.select(ended).traces(), strict=True))
            for i, found in zip(rows[ended].tolist(), ids, strict=True):
                out[i] = found
            keep = (~done).nonzero().flatten()
            if keep.numel() == 0:
                break
            rows, hyp, tok, cache = rows[keep], hyp[keep], tok[keep], cache.reorder(keep)
            traced = None if traced is None else traced.select(keep)
        prev = tok[:, None]
    return out


def sample_seed(seed: int, ids: list[int], copy: int) -> int:
    """The seed of one sample's generator, from decode.seed, the sentence's source ids (no
    padding) and the sample's number: so a line's samples do not depend on the lines that
    share its batch (the Translator sorts lines into batches by length)."""
    key = f"{seed} {copy} {' '.join(map(str, ids))}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 1


NUCLEUS_BINS, BINS_PER_NAT = 2048, 64  # topp: log-probability bins, down to 32 nats (nucleus)


def nucleus(probs: torch.Tensor, p: float, logits: torch.Tensor | None = None) -> torch.Tensor:
    """probs (r, V) -> (r, V) bool: the smallest set of most likely tokens whose mass reaches p
    (a token is kept while the mass of those more likely has not reached p); logits: those of
    probs (their softmax), if at hand.

    Without sorting rows: a flat row's nucleus holds thousands of tokens, and sorting whole rows
    cost as much as the model's step. Tokens are binned by how far their log-probability lies
    below the row's best (1/64 nat a bin); the bins' cumulative mass finds the bin where the mass
    reaches p, and only that bin's few tokens are sorted."""
    if p >= 1:
        return probs > 0
    if logits is None:
        logits = probs.log()  # -inf where a probability underflowed
    gap = logits.amax(-1, keepdim=True) - logits  # (r, V) log-probability below the best, >= 0
    bins = (gap * BINS_PER_NAT).clamp(max=NUCLEUS_BINS - 1).long()
    mass = probs.new_zeros(probs.size(0), NUCLEUS_BINS).scatter_add_(1, bins, probs)
    cum = mass.cumsum(-1)  # (r, bins): the mass down to each bin
    k = (cum < p).sum(-1, keepdim=True).clamp(max=NUCLEUS_BINS - 1)  # (r, 1) the boundary bin
    above = (cum - mass).gather(1, k)  # (r, 1) the mass of the bins before it
    inside = bins == k
    vals, ids = (probs * inside).topk(int(inside.sum(-1).max()), dim=-1)  # its tokens, sorted
    take = (above + vals.cumsum(-1) - vals < p) & (vals > 0)
    return (bins < k) | torch.zeros_like(inside).scatter_(1, ids, take)


def draw(logits: torch.Tensor, cfg: DecodeConfig, u: torch.Tensor) -> torch.Tensor:
    """logits (r, V), uniforms u (r, 2) in [0, 1) -> (r,) one token per row from
    softmax(logits / temperature), cut to the decode.topk best or to the decode.topp `nucleus`
    and renormalised: the same logits and uniforms give the same token, whatever the rest of
    the batch.

    Top-k inverts the k best's CDF at u[:, 0]. Top-p draws first and cuts after: a token drawn
    from the whole row at u[:, 0] is kept when it lies in the nucleus (the mass of the tokens
    more likely than it is below p), which it does with probability >= p; so a kept token has
    the nucleus's distribution, and only the rows that drew outside it (u[:, 1] inverts their
    nucleus) pay for finding the nucleus. A token of probability above 1 - p needs no check:
    the others together hold less than p.
    """
    logits = logits.float()
    if cfg.temperature != 1.0:
        logits = logits / cfg.temperature
    probs = logits.softmax(-1)
    if cfg.sampling == "topk":  # only the k best need sorting
        top, ids = probs.topk(min(cfg.topk, probs.size(-1)), dim=-1)
        return ids.gather(1, _inverted(top, u[:, 0])).squeeze(1)
    token = _inverted(probs, u[:, 0])  # (r, 1)
    mine = probs.gather(1, token)
    check = (mine <= 1 - cfg.topp).squeeze(1).nonzero().squeeze(1)
    if check.numel():
        rows, mine = probs[check], mine[check]
        more_likely = torch.where(rows > mine, rows, 0.0).sum(-1)
        out = (more_likely >= cfg.topp).nonzero().squeeze(1)
        if out.numel():
            cut = rows[out] * nucleus(rows[out], cfg.topp)
            token[check[out]] = _inverted(cut, u[check[out], 1])
    return token.squeeze(1)


def _inverted(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """weights (r, K) >= 0, u (r,) -> (r, 1) the column where their cumulative sum passes u
    times its total: the first column whose cumulative sum exceeds it, so never one of weight
    0 (rounding that overshoots the total takes the last column of weight > 0).

    Over vocabulary-sized rows, like `argmax`: a cumulative sum over chunk sums finds the
    chunk, one over the chunk's CHUNK weights the column; a row's cumulative sum is a serial
    pass that costs more than the rest together."""
    r, K = weights.shape
    if K < 4 * CHUNK:
        cum = weights.cumsum(-1)
        return _passes(weights, cum, u[:, None] * cum[:, -1:])
    whole = K - K % CHUNK
    sums = weights[:, :whole].view(r, -1, CHUNK).sum(-1)  # (r, K // CHUNK)
    if whole < K:
        sums = torch.cat([sums, weights[:, whole:].sum(-1, keepdim=True)], dim=1)
    cum = sums.cumsum(-1)
    target = u[:, None] * cum[:, -1:]  # (r, 1)
    chunk = _passes(sums, cum, target)  # (r, 1)
    cols = chunk * CHUNK + torch.arange(CHUNK, device=weights.device)  # (r, CHUNK)
    inside = weights.gather(1, cols.clamp(max=K - 1)) * (cols < K)  # the last chunk is short
    local = _passes(inside, inside.cumsum(-1), target - (cum - sums).gather(1, chunk))
    return cols.gather(1, local)


def _passes(weights: torch.Tensor, cum: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """weights (r, K) >= 0, their cumulative sums, target (r, 1) -> (r, 1) the first column
    whose cumulative sum exceeds target; the last of weight > 0 where none does."""
    at = torch.searchsorted(cum, target, right=True)
    last = ((weights > 0) * torch.arange(1, weights.size(1) + 1, device=weights.device)).amax(-1)
    return torch.minimum(at, (last - 1).clamp(min=0)[:, None])


@torch.no_grad()
def sample(model: Decodable, src: torch.Tensor, cfg: DecodeConfig,
           prefix: torch.Tensor | None = None, memory: Memory | None = None,
           trace: bool = False) -> list[list[int]] | list[tuple[list[int], Trace]]:
    """src (B, S) -> B * decode.samples sampled outputs (decode.samples per sentence, in
    turn), greedy's loop with `draw` for argmax; with trace, each with its Trace.

    Each output draws two uniforms per step (`draw`) from its own CPU torch.Generator, seeded
    by `sample_seed`; so an output depends on decode.seed, its source line, its number and the
    model's logits only (on CPU, those do not depend on the batch either).
    """
    n = cfg.samples
    limits = with_prefix(max_lengths(src != PAD, cfg.max_len_a, cfg.max_len_b,
                                     model.cfg.max_positions), prefix)
    uniforms = torch.zeros(src.size(0) * n, int(limits.max()) + 1, 2)  # (B * n, steps, 2)
    for s, (ids, limit) in enumerate(zip(src.tolist(), limits.tolist(), strict=True)):
        ids = [i for i in ids if i != PAD]
        for j in range(n):
            g = torch.Generator().manual_seed(sample_seed(cfg.seed, ids, j))
            for k in range(2):  # the first stream as it always was: top-k's draws unchanged
                uniforms[s * n + j, : limit + 1, k] = torch.rand(limit + 1, generator=g)
    uniforms = uniforms.to(src.device)

    def choose(scores: torch.Tensor, rows: torch.Tensor, t: int) -> torch.Tensor:
        return draw(scores, cfg, uniforms[rows, t])

    return incremental(model, src, cfg, choose, n, prefix, memory, trace)


@torch.no_grad()
def sequence_scores(model: Decodable, src: torch.Tensor, hyps: list[list[int]],
                    cfg: DecodeConfig) -> list[float]:
    """Teacher-forced scores of given outputs (e.g. greedy's), on the same scale as beam's."""
    lengths = torch.tensor([len(h) + 1 for h in hyps], device=src.device)  # <eos> counted
    tgt_in = torch.full((len(hyps), int(lengths.max())), PAD, dtype=torch.long)
    tgt_out = tgt_in.clone()
    for i, h in enumerate(hyps):
        tgt_in[i, : len(h) + 1] = torch.tensor([start_id(model.cfg.decoder_start)] + h)
        tgt_out[i, : len(h) + 1] = torch.tensor(h + [EOS])
    tgt_in, tgt_out = tgt_in.to(src.device), tgt_out.to(src.device)
    lprobs = model.log_probs(model(src, tgt_in))  # (B, T, V)
    picked = lprobs.gather(-1, tgt_out[..., None]).squeeze(-1)  # (B, T)
    inside = torch.arange(tgt_out.size(1), device=src.device) < lengths[:, None]  # (B, T)
    logp = picked.masked_fill(~inside, 0.0).sum(-1)
    return (logp / length_penalty(lengths, cfg.length_norm, cfg.length_penalty)).tolist()


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
    (k is 1 at the first step, when every sentence has one beam: the empty one.)
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
    # the members of those 2K chunks only: same result.
    m = k * V
    cand = lprobs.new_empty(b, m + (-m % CHUNK))  # (b, chunks * CHUNK), -inf padded
    cand[:, m:] = float("-inf")
    torch.add(scores[:, :, None], lprobs, out=cand[:, :m].view(b, k, V))
    chunks = cand.view(b, -1, CHUNK)
    best = chunks.amax(-1).topk(2 * K, dim=-1).indices  # (b, 2K) chunk numbers
    members = chunks.gather(1, best[:, :, None].expand(-1, -1, CHUNK))  # (b, 2K, CHUNK)
    top, at = members.view(b, -1).topk(2 * K, dim=-1)
    flat = best.gather(1, at // CHUNK) * CHUNK + at % CHUNK
    flat = flat.clamp(max=m - 1)  # a padding slot (-inf) gets a real token and beam
    return top, flat % V, flat // V


@torch.no_grad()
def beam_search(model: Decodable, src: torch.Tensor, cfg: DecodeConfig,
                prefix: torch.Tensor | None = None, terms: Terms | None = None,
                memory: Memory | None = None, attend: bool = False, trace: bool = False
                ) -> list[list[Hypothesis]]:
    """src (B, S) -> for each sentence up to cfg.nbest distinct hypotheses, best first; with a
    prefix (B, P), each starting with its sentence's (the forced token is a beam's only
    candidate, so the beams behind a prefix are one live beam and impossible ones); with
    terms, each holding its sentence's terms unless the length limit cut it short
    (mt.constrained: the candidates are then ranked by `Terms.step` after `beam_step`).

    The flat batch holds K rows per running sentence (one at the first step, where all K
    beams would be the same empty prefix). The encoder runs once and its keys and values are
    shared by the sentence's rows; each step ranks the k*V candidates (`beam_step`) and moves
    the beams with one `cache.reorder`, which also drops the rows of sentences that are done.

    A sentence stops when its n-best list is final (see `_done`); the search ends when every
    sentence has stopped. attend: each hypothesis gets its cross-attention (a Seq2Seq's);
    trace: its Trace (mt.trace), moved along with the beams like their tokens.
    """
    K, n, V = cfg.beam, min(cfg.nbest, cfg.beam), model.vocab_size
    norm, alpha = cfg.length_norm, cfg.length_penalty
    src_mask = model.src_mask(src)
    cache = model.start_cache(model.encode(src, src_mask) if memory is None else memory,
                              src_mask)
    constraints = Constraints.of(cfg, src_mask, model.cfg.max_positions, prefix, terms=terms)
    limits = constraints.limits
    B, dev = src.size(0), src.device
    rows = torch.arange(B, device=dev)  # original sentence of each running sentence
    state = None if terms is None else terms.start(rows)  # (b*k rows) where each beam stands
    scores = torch.zeros(B, 1, device=dev)  # (b, k) log-probs of live beams
    kept = torch.full((B, n), float("-inf"), device=dev)  # (b, n) n best finished scores
    hyp = torch.empty(B, 0, dtype=torch.long, device=dev)  # (b*k, t) tokens so far
    prev = torch.full((B, 1), start_id(model.cfg.decoder_start), dtype=torch.long, device=dev)
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    # attend: each live beam's cross-attention so far (b*k, t, S), moved with its tokens, so
    # that word alignments need no second, teacher-forced pass (a Seq2Seq's decode only)
    seen = torch.empty(B, 0, src.size(1), device=dev) if attend else None
    traced = _tracer(model, B, src.size(1), dev, trace)
    for t in range(int(limits.max()) + 1):
        states, cache, layers, members = _decode(model, prev, cache, attend or trace,
                                                 trace and traced.members is not None)
        nexts = model.next_scores(states[:, -1])
        scored = model.log_probs_entropy(nexts) if trace else None
        lprobs = model.log_probs(nexts) if scored is None else scored[0]  # (b*k, V)
        if layers is not None:  # this step's record, before the constraints change lprobs
            step = Step.of(scored, layers, members)
        b, k = scores.shape
        lprobs = constraints.apply(lprobs, t, hyp, rows.repeat_interleave(k), state)
        top, tokens, beams = beam_step(lprobs.view(b, k, V), scores, K)  # (b, 2K) each
        if state is not None:  # (b, N) each, in the order the banks deal them
            top, tokens, beams, state = terms.step(lprobs.view(b, k, V), scores, state,
                                                   (top, tokens, beams))
        N = top.size(1)

        # 1) candidates ranked in the top K that end in <eos> finish
        ends = (tokens == EOS) & top.isfinite()
        ends[:, K:] = False
        final = torch.where(ends, top / length_penalty(t + 1, norm, alpha), float("-inf"))
        if ends.any():
            kept = torch.cat([kept, final], dim=1).topk(n, dim=-1).values
            sent, rank = ends.nonzero().unbind(-1)
            ended = sent * k + beams[sent, rank]
            prefixes = hyp.index_select(0, ended).tolist()
            looked = [None] * len(prefixes) if seen is None else seen.index_select(0, ended)
            scored = final[sent, rank].tolist()
            held = ([True] * len(scored) if state is None else
                    state.complete[sent * N + rank].tolist())  # step's states
            traces = ([None] * len(prefixes) if traced is None else
                      traced.extend(ended, step, tokens[sent, rank]).traces())
            for s, toks, sc, h, a, tr in zip(rows[sent].tolist(), prefixes, scored, held,
                                             looked, traces, strict=True):
                finished[s].append(Hypothesis(toks, sc, h, a, tr))

        # 2) the K best candidates that do not end stay live, best first (with terms: the
        # first K in the order the banks deal them)
        order = torch.arange(N, device=dev) + (tokens == EOS) * N
        live = order.topk(K, dim=-1, largest=False).indices  # (b, K)
        scores, tokens, beams = top.gather(1, live), tokens.gather(1, live), beams.gather(1, live)

        # 3) sentences that are done leave the batch
        done = _done(t, limits[rows], kept[:, -1], scores.amax(-1), norm, alpha)
        keep = (~done).nonzero().flatten()  # (b',) sentences that go on
        if keep.numel() == 0:
            break
        moved = (keep[:, None] * k + beams[keep]).flatten()  # (b'*K,) rows each new beam extends
        cache = cache.reorder(moved, group=K)
        prev = tokens[keep].reshape(-1, 1)
        hyp = torch.cat([hyp.index_select(0, moved), prev], dim=1)
        if seen is not None:
            seen = torch.cat([seen.index_select(0, moved),
                              step.attention.index_select(0, moved)[:, None]], dim=1)
        if traced is not None:
            traced = traced.extend(moved, step, prev.flatten())
        rows, scores, kept = rows[keep], scores[keep], kept[keep]
        if state is not None:
            state = state.index((keep[:, None] * N + live[keep]).flatten())
    # those that hold their terms first (the others ended at the length limit)
    return [sorted(f, key=lambda h: (not h.held, -h.score))[:n] for f in finished]
