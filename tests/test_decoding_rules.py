"""mt/decoding/rules.py: beam search against greedy and exhaustive search, the cache reordered as
beams move, n-best lists, the length limits and the stopping rule. The searches as the tests
call them (greedy, sample, beam_search) are here too."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from conftest import TOY
from mt.checkpoint import load_run
from mt.config import DecodeConfig, ModelConfig
from mt.data import pad
from mt.decoding import constraints, rules, search
from mt.decoding import step as steps
from mt.decoding.request import SearchRequest
from mt.decoding.scores import length_penalty
from mt.model import DecoderCache, make_model
from mt.static_cache import StaticCache
from mt.translator import Translator
from mt.vocab import BOS, EOS, PAD, UNK

CONTENT = [UNK, BOS, 4, 5]  # with V=6, every token a search may emit before <eos> (not <pad>)


def small_model(V: int, seed: int, d_model: int = 32, tie_output: bool = True):
    torch.manual_seed(seed)
    cfg = ModelConfig(d_model=d_model, n_heads=4, n_enc_layers=2, n_dec_layers=2,
                      d_ff=2 * d_model, dropout=0.0, max_positions=64, tie_output=tie_output)
    return make_model(cfg, V, V).eval()


def random_src(B: int, S: int, V: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (B, S), generator=g)
    for i in range(1, B):
        src[i, S - i:] = PAD  # varied source lengths, so varied length limits
    return src


def greedy(model, src, cfg, prefix=None, memory=None, trace=False, rule=rules.Greedy):
    """src (B, S) -> each row's output ids (with trace: (ids, its Trace)), in the loop with rule
    (greedy's, or another that gives one hypothesis per row)."""
    found = search.search(model, SearchRequest(src, cfg, prefix, memory=memory, trace=trace),
                          rule)
    hyps = [h for hyps in found for h in hyps]
    return [(h.tokens, h.trace) for h in hyps] if trace else [h.tokens for h in hyps]


def sample(model, src, cfg, prefix=None, memory=None, trace=False):
    """src (B, S) -> decode.samples outputs per sentence, in turn, as greedy gives them."""
    return greedy(model, src, cfg, prefix, memory, trace, rule=rules.Sample)


def beam_search(model, src, cfg, prefix=None, terms=None, memory=None, attend=False,
                trace=False):
    """src (B, S) -> each sentence's hypotheses from beam search."""
    return search.search(model, SearchRequest(src, cfg, prefix, terms, memory,
                                              attention=attend, trace=trace), rules.Beam)


def teacher_forced_logprob(model, src: torch.Tensor, outputs: list[list[int]]) -> torch.Tensor:
    """log p(y <eos> | x) of each output for one source (1, S), from one full forward pass."""
    tgt_in = pad([[BOS] + y for y in outputs])
    tgt_out = pad([y + [EOS] for y in outputs])
    inside = torch.arange(tgt_out.size(1)) <= torch.tensor([len(y) for y in outputs])[:, None]
    with torch.no_grad():
        lp = F.log_softmax(model(src.expand(len(outputs), -1), tgt_in).float(), -1)
    picked = lp.gather(-1, tgt_out[..., None]).squeeze(-1)
    return picked.masked_fill(~inside, 0.0).sum(-1)


# --- beam 1 is greedy -------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_beam_of_one_equals_greedy_on_random_model(seed):
    V = 8  # small enough that <eos> comes at varied steps, not only at the length limit
    model, src = small_model(V, seed), random_src(6, 7, V, seed)
    lengths = set()
    for min_len in (0, 2):
        g = greedy(model, src, DecodeConfig(max_len_a=1.0, max_len_b=3, min_len=min_len))
        for norm, alpha in (("none", 0.0), ("gnmt", 0.0)):
            cfg = DecodeConfig(beam=1, length_norm=norm, length_penalty=alpha, min_len=min_len,
                               max_len_a=1.0, max_len_b=3)
            assert [h[0].tokens for h in beam_search(model, src, cfg)] == g
        lengths |= {len(h) for h in g}
    assert len(lengths) > 2  # <eos> came early and late: the comparison says something


def test_beam_of_one_equals_greedy_on_trained_model(tiny_run):
    run = load_run(tiny_run)
    src = _toy_batch(run, 40)
    g = greedy(run.model, src, DecodeConfig(max_len_a=1.5, max_len_b=5))
    cfg = DecodeConfig(beam=1, length_norm="none", max_len_a=1.5, max_len_b=5)
    assert [h[0].tokens for h in beam_search(run.model, src, cfg)] == g
    assert all(0 < len(h) < 30 for h in g)  # the model translates: it ends its sentences


def _toy_batch(run, n: int) -> torch.Tensor:
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:n]
    return pad([run.src_vocab.encode(t) for t in Translator(run).src_tok.tokenize_many(lines)])


# --- beam search is exact when the beam holds everything -------------------------------------

SETTINGS = [("none", 0.0, 0), ("none", 0.0, 2), ("average", 0.0, 0), ("gnmt", 0.6, 0),
            ("gnmt", 1.0, 1), ("gnmt", 2.0, 2)]  # length_norm, length_penalty, min_len


def test_wide_beam_equals_exhaustive_search():
    """V=6: 4 tokens besides <eos> and <pad> (never generated), so outputs of at most L=3
    tokens number 1+4+16+64. With K = 150 every prefix stays live and every ending ranks in the
    top K, so beam search must return the exhaustive n-best, length penalty and all."""
    V, L, K, n = 6, 3, 150, 5
    best_lengths = set()
    for norm, alpha, min_len in SETTINGS:
        beats_greedy = 0
        for seed in range(3):
            model = small_model(V, seed, d_model=16)
            with torch.no_grad():
                model.generator.weight *= 3  # peaked distributions: a less uniform problem
            src = random_src(3, 5, V, seed)
            cfg = DecodeConfig(beam=K, nbest=n, length_norm=norm, length_penalty=alpha,
                               min_len=min_len, max_len_a=0.0, max_len_b=L)
            found = beam_search(model, src, cfg)
            outputs = [list(y) for m in range(min_len, L + 1)
                       for y in itertools.product(CONTENT, repeat=m)]
            lp = torch.tensor([length_penalty(len(y) + 1, norm, alpha) for y in outputs])
            for i in range(src.size(0)):
                s = src[i:i + 1, : int((src[i] != PAD).sum())]
                scores = teacher_forced_logprob(model, s, outputs) / lp
                top = scores.topk(n).indices.tolist()
                assert [h.tokens for h in found[i]] == [outputs[j] for j in top], (norm, alpha)
                assert [h.score for h in found[i]] == pytest.approx(scores[top].tolist(),
                                                                    abs=1e-4)
                best_lengths.add(len(outputs[top[0]]))
                plain = DecodeConfig(max_len_a=0.0, max_len_b=L, min_len=min_len)
                beats_greedy += outputs[top[0]] != greedy(model, s, plain)[0]
        assert beats_greedy > 0, (norm, alpha, min_len)  # the search problem is not trivial
    assert len(best_lengths) > 2


def test_length_penalty_formulas():
    assert length_penalty(7, "gnmt", 1.0) == pytest.approx(2.0)
    assert length_penalty(7, "gnmt", 0.0) == pytest.approx(1.0)
    assert length_penalty(7, "average", 0.6) == pytest.approx(7.0)
    assert length_penalty(7, "none", 0.6) == pytest.approx(1.0)


# --- n-best lists ----------------------------------------------------------------------------

@pytest.mark.parametrize("norm", ["gnmt", "average", "none"])
def test_nbest_sorted_distinct_and_scored_like_teacher_forcing(norm):
    V = 12
    model, src = small_model(V, 3), random_src(4, 6, V, 3)
    cfg = DecodeConfig(beam=6, nbest=6, length_norm=norm, length_penalty=1.0, max_len_b=6)
    for i, hyps in enumerate(beam_search(model, src, cfg)):
        assert len(hyps) == 6
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 6
        assert all(EOS not in h.tokens for h in hyps)
        s = src[i:i + 1, : int((src[i] != PAD).sum())]
        lp = torch.tensor([length_penalty(len(h.tokens) + 1, norm, 1.0) for h in hyps])
        want = teacher_forced_logprob(model, s, [h.tokens for h in hyps]) / lp
        assert scores == pytest.approx(want.tolist(), abs=1e-4)


def test_nbest_is_a_prefix_of_a_longer_nbest():
    """The stopping rule makes the n-best list final: asking for more cannot change it."""
    V = 12
    model, src = small_model(V, 5), random_src(4, 6, V, 5)
    long = beam_search(model, src, DecodeConfig(beam=5, nbest=5, length_norm="average"))
    short = beam_search(model, src, DecodeConfig(beam=5, nbest=2, length_norm="average"))
    assert [[h.tokens for h in x] for x in short] == [[h.tokens for h in x[:2]] for x in long]


def test_min_len_and_max_len_are_respected():
    V = 6
    model, src = small_model(V, 0, d_model=16), random_src(4, 6, V, 0)
    src_lens = (src != PAD).sum(-1).tolist()
    cfg = DecodeConfig(beam=4, nbest=4, max_len_a=0.5, max_len_b=2)
    assert min(len(h.tokens) for hyps in beam_search(model, src, cfg) for h in hyps) < 3
    cfg.min_len = 3
    for hyps, n in zip(beam_search(model, src, cfg), src_lens, strict=True):
        assert len(hyps) == 4 and all(3 <= len(h.tokens) <= int(0.5 * n + 2) for h in hyps)
    # the limit wins over min_len: no sentence is left without an output
    cfg = DecodeConfig(beam=4, min_len=10, max_len_a=0.0, max_len_b=2)
    assert all(len(h[0].tokens) == 2 for h in beam_search(model, src, cfg))


def test_batch_equals_each_sentence_alone():
    """Sentences leave the flat batch as they finish; the rest must not notice."""
    V = 10
    model, src = small_model(V, 2), random_src(5, 8, V, 2)
    cfg = DecodeConfig(beam=4, nbest=3, length_norm="average", max_len_b=4)
    together = beam_search(model, src, cfg)
    for i in range(src.size(0)):
        alone = beam_search(model, src[i:i + 1, : int((src[i] != PAD).sum())], cfg)[0]
        assert [h.tokens for h in together[i]] == [h.tokens for h in alone]
        assert [h.score for h in together[i]] == pytest.approx([h.score for h in alone],
                                                               abs=1e-4)


@pytest.mark.parametrize("k,V", [(1, 1000), (5, 1000), (5, 6190), (5, 8000), (5, 130)])
def test_chunked_beam_step_ranks_like_one_topk_over_all_candidates(k, V):
    """beam_step's chunked search (large k*V) picks the same 2K candidates, in the same order,
    as one topk over all k*V; with fewer than 2K finite candidates (a sentence at its length
    limit) the rest are -inf with tokens and beams still in range."""
    K, b = 5, 7
    assert k * V >= 2 * K * search.CHUNK  # the chunked path
    g = torch.Generator().manual_seed(V + k)
    lprobs = torch.randn(b, k, V, generator=g).log_softmax(-1)
    lprobs[1, :, 100:] = float("-inf")  # only 100 words a beam
    lprobs[2, :, :] = float("-inf")
    lprobs[2, :, EOS] = -1.0  # at the length limit: <eos> or nothing
    scores = torch.randn(b, k, generator=g)
    top, tokens, beams = rules.beam_step(lprobs, scores, K)
    want, flat = (scores[:, :, None] + lprobs).view(b, -1).topk(2 * K, dim=-1)
    assert torch.equal(top, want)
    finite = want.isfinite()
    assert torch.equal(tokens[finite], (flat % V)[finite])
    assert torch.equal(beams[finite], (flat // V)[finite])
    assert finite[2].sum() == k and not finite.all()
    assert tokens.max() < V and beams.max() < k and tokens.min() >= 0


@pytest.mark.parametrize("V", [256, 6195, 6208, 8000])
def test_chunked_argmax_is_torchs_argmax(V):
    """rules.argmax (chunk maxima, then inside one chunk) returns torch's first index of the
    maximum: ties, a maximum in the short last chunk or at the very end, -inf entries."""
    g = torch.Generator().manual_seed(V)
    scores = torch.randn(9, V, generator=g)
    scores[1, [7, V - 3]] = 9.0  # a tie: the first one wins
    scores[2, V - 1] = 9.0  # the last column (inside the short chunk when V % CHUNK)
    scores[3, :] = 1.0  # all equal: index 0
    scores[4, EOS] = float("-inf")  # as _forbid leaves them
    scores[5, :-1] = float("-inf")
    scores[6] = scores[6].round()  # many ties within chunks
    assert torch.equal(rules.argmax(scores), scores.argmax(-1))
    bf16 = scores.bfloat16()
    assert torch.equal(rules.argmax(bf16), bf16.argmax(-1))


# --- the cache -------------------------------------------------------------------------------

@torch.no_grad()
def test_reordered_cache_matches_redecoding_the_reordered_prefixes():
    V, B, K = 12, 3, 4
    model, src = small_model(V, 4), random_src(B, 6, V, 4)
    g = torch.Generator().manual_seed(4)
    src_mask = model.src_mask(src)
    cache = model.start_cache(model.encode(src, src_mask), src_mask)
    rows = torch.arange(B).repeat_interleave(K)  # source sentence of each row
    cache = cache.reorder(rows)
    prefix = torch.full((B * K, 1), BOS)
    for _ in range(5):
        states, cache = model.decode(prefix[:, -1:], cache)
        full, _ = model.decode(prefix, model.start_cache(
            model.encode(src[rows], src_mask[rows]), src_mask[rows]))
        torch.testing.assert_close(states[:, -1], full[:, -1], atol=1e-5, rtol=1e-4)
        # move rows as a beam would: repeat some, drop some, and drop a whole sentence once
        index = torch.randint(0, rows.numel(), (rows.numel(),), generator=g)
        if prefix.size(1) == 3:
            index = index[rows[index] != rows[0]]
        cache, rows = cache.reorder(index), rows[index]
        prefix = torch.cat([prefix[index], torch.randint(4, V, (index.numel(), 1),
                                                         generator=g)], dim=1)


@torch.no_grad()
def test_grouped_cache_matches_redecoding_the_reordered_prefixes():
    """Beam search's cache: one row per sentence at first, then K rows per sentence sharing
    one copy of the encoder's keys/values."""
    V, B, K = 12, 3, 4
    model, src = small_model(V, 4), random_src(B, 6, V, 4)
    g = torch.Generator().manual_seed(5)
    src_mask = model.src_mask(src)
    cache = model.start_cache(model.encode(src, src_mask), src_mask)
    sents, k = torch.arange(B), 1  # source sentence of each block of k rows
    prefix = torch.full((B, 1), BOS)
    for step in range(5):
        states, cache = model.decode(prefix[:, -1:], cache)
        rows = sents.repeat_interleave(k)
        full, _ = model.decode(prefix, model.start_cache(
            model.encode(src[rows], src_mask[rows]), src_mask[rows]))
        torch.testing.assert_close(states[:, -1], full[:, -1], atol=1e-5, rtol=1e-4)
        # as beam search moves rows: each block draws from its own sentence's rows; at step 2
        # the first sentence leaves the batch
        keep = torch.arange(sents.numel())[1:] if step == 2 else torch.arange(sents.numel())
        within = torch.randint(0, k, (keep.numel(), K), generator=g)
        index = (keep[:, None] * k + within).flatten()
        cache, sents, k = cache.reorder(index, group=K), sents[keep], K
        assert cache.cross[0][0].size(0) == sents.numel()  # one copy per sentence, not K
        prefix = torch.cat([prefix[index], torch.randint(4, V, (index.numel(), 1),
                                                         generator=g)], dim=1)


@pytest.mark.parametrize("static", [True, False])
def test_one_cache_reorder_per_step(monkeypatch, static):
    """With the static cache (mt.static_cache) and with the one that grows each step."""
    monkeypatch.setattr(steps, "STATIC", static)
    cls = StaticCache if static else DecoderCache
    calls = {"reorder": 0, "decode": 0}
    reorder, model = cls.reorder, small_model(12, 6)
    decode = model.decode

    def counting_reorder(self, index, group=None):
        calls["reorder"] += 1
        return reorder(self, index, group)

    def counting_decode(tgt, cache):
        calls["decode"] += 1
        return decode(tgt, cache)

    monkeypatch.setattr(cls, "reorder", counting_reorder)
    monkeypatch.setattr(model, "decode", counting_decode)
    beam_search(model, random_src(4, 6, 12, 6), DecodeConfig(beam=4, max_len_b=5))
    # one after every step but the last
    assert calls["decode"] > 3 and calls["reorder"] == calls["decode"] - 1


# --- Translator: batching, order, empty lines ------------------------------------------------


# --- configuration and command line ----------------------------------------------------------


@pytest.mark.parametrize("norm,alpha", [("average", 0.0), ("gnmt", 1.0), ("gnmt", 2.0)])
def test_stopping_early_changes_nothing(tiny_run, monkeypatch, norm, alpha):
    """Running every sentence to its length limit finds the same n-best lists: the stopping
    bound is safe even when the length penalty rewards longer outputs (a trained model,
    confident enough that long continuations cost little)."""
    run = load_run(tiny_run)
    src = _toy_batch(run, 40)
    cfg = DecodeConfig(beam=4, nbest=4, length_norm=norm, length_penalty=alpha)
    early = beam_search(run.model, src, cfg)
    monkeypatch.setattr(rules, "_done", lambda t, limits, *rest: limits <= t)
    late = beam_search(run.model, src, cfg)
    for a, b in zip(early, late, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]


def test_search_stops_long_before_the_length_limit(tiny_run, monkeypatch):
    """Sentences stop when no live beam can still win, not at the limit (steps counted)."""
    run = load_run(tiny_run)
    src, steps, decode = _toy_batch(run, 8), [], run.model.decode
    monkeypatch.setattr(run.model, "decode", lambda tgt, c: steps.append(1) or decode(tgt, c))
    for norm in ("gnmt", "average", "none"):
        steps.clear()
        cfg = DecodeConfig(beam=4, length_norm=norm, max_len_a=0.0, max_len_b=60)
        hyps = beam_search(run.model, src, cfg)
        assert all(len(h[0].tokens) < 20 for h in hyps) and len(steps) < 30


def test_a_constraint_plugged_in_once_reaches_greedy_sampling_and_beam(monkeypatch):
    """Constraints.apply is where every search's step scores are constrained: a token banned
    there alone is gone from greedy's, sampling's and beam search's outputs."""
    model, src = small_model(24, 5), random_src(4, 6, 24, 5)  # untrained: any token comes up
    cfg = DecodeConfig(max_len_a=0.0, max_len_b=12)
    searches = {"greedy": lambda: greedy(model, src, cfg),
                "sample": lambda: sample(model, src, replace(cfg, sampling="topk",
                                                                    topk=24, samples=3)),
                "beam": lambda: [h.tokens for hyps in beam_search(model, src,
                                                                  replace(cfg, beam=4, nbest=4))
                                 for h in hyps]}
    free = {name: run() for name, run in searches.items()}
    banned = Counter(t for out in free.values() for h in out for t in h).most_common(1)[0][0]
    assert all(any(banned in h for h in out) for out in free.values())  # so it can fail
    plain = constraints.Constraints.apply

    def apply(self, scores, t, hyp, rows, state=None):
        scores = plain(self, scores, t, hyp, rows, state)
        scores[:, banned] = float("-inf")
        return scores

    monkeypatch.setattr(constraints.Constraints, "apply", apply)
    for name, run in searches.items():
        assert not any(banned in h for h in run()), name


def test_seq2seq_and_an_ensemble_are_decodable():
    from mt.ensemble import Ensemble

    model = small_model(16, 1)
    assert isinstance(model, search.Decodable)
    assert isinstance(Ensemble([model, small_model(16, 2)]), search.Decodable)
    assert not isinstance(model.encoder, search.Decodable)
