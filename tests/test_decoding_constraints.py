"""mt/decoding/constraints.py, a forced target prefix: every output starts with its prefix, beam
search with a prefix is the exhaustive search over the prefix's continuations, greedy with a prefix
is greedy continued after it, and the prefix outlasts the length limit and the constraints."""

from __future__ import annotations

import itertools

import pytest
import torch
from test_decoding_rules import (
    CONTENT,
    beam_search,
    greedy,
    random_src,
    sample,
    small_model,
    teacher_forced_logprob,
)

from mt.config import DecodeConfig
from mt.data import pad
from mt.decoding.scores import length_penalty
from mt.vocab import BOS, PAD, UNK

PREFIXES = [[4], [], [5, 4], [UNK, 5]]  # per sentence; [] is none


def test_wide_beam_with_a_prefix_equals_exhaustive_search_over_its_continuations():
    """V=6, outputs of at most L=4 tokens, the prefix included: with K = every prefix of the
    search space, beam search must return the n best outputs that start with the prefix."""
    V, L, K, n = 6, 4, 150, 4
    beats_greedy = 0
    for seed, (norm, alpha) in itertools.product(range(2), [("gnmt", 1.0), ("none", 0.0)]):
        model = small_model(V, seed, d_model=16)
        with torch.no_grad():
            model.generator.weight *= 3  # peaked distributions: a less uniform problem
        src = random_src(4, 5, V, seed)
        prefix = pad(PREFIXES)
        cfg = DecodeConfig(beam=K, nbest=n, length_norm=norm, length_penalty=alpha,
                           max_len_a=0.0, max_len_b=L)
        found = beam_search(model, src, cfg, prefix)
        for i, p in enumerate(PREFIXES):
            outputs = [p + list(y) for m in range(L - len(p) + 1)
                       for y in itertools.product(CONTENT, repeat=m)]
            lp = torch.tensor([length_penalty(len(y) + 1, norm, alpha) for y in outputs])
            s = src[i:i + 1, : int((src[i] != PAD).sum())]
            scores = teacher_forced_logprob(model, s, outputs) / lp
            top = scores.topk(n).indices.tolist()
            assert [h.tokens for h in found[i]] == [outputs[j] for j in top], (seed, norm, p)
            assert [h.score for h in found[i]] == pytest.approx(scores[top].tolist(), abs=1e-4)
            best_free = beam_search(model, s, cfg)[0][0].tokens
            beats_greedy += p != [] and best_free[: len(p)] != p  # the prefix changed things
    assert beats_greedy > 0


def test_greedy_with_a_prefix_is_greedy_continued_after_it():
    V = 8
    model, src = small_model(V, 3), random_src(4, 6, V, 3)
    out = greedy(model, src, DecodeConfig(max_len_a=1.0, max_len_b=3), pad(PREFIXES))
    free = greedy(model, src, DecodeConfig(max_len_a=1.0, max_len_b=3))
    for i, p in enumerate(PREFIXES):
        assert out[i][: len(p)] == p
        if not p:
            assert out[i] == free[i]
    # Step by step: after its prefix, each token is the argmax given everything before it.
    for i, p in enumerate(PREFIXES):
        s = src[i:i + 1, : int((src[i] != PAD).sum())]
        for j in range(len(p), len(out[i])):
            with torch.no_grad():
                logits = model(s, torch.tensor([[BOS] + out[i][:j]]))[0, -1]
            assert logits[out[i][j]] == pytest.approx(logits.max().item(), abs=1e-5)


def test_a_prefix_beats_the_length_limit_min_len_and_repetition_blocking():
    V = 8
    model, src = small_model(V, 1), random_src(3, 4, V, 1)
    long = [[4, 4, 4, 4, 4, 4], [5, 6, 5, 6, 5, 6], []]  # longer than the limit, repeating
    prefix = pad(long)
    cfg = DecodeConfig(beam=3, nbest=2, max_len_a=0.0, max_len_b=2, no_repeat_ngram=2,
                       min_len=1)
    for hyps in (h.tokens for n in beam_search(model, src, cfg, prefix) for h in n), greedy(
            model, src, cfg, prefix), sample(
            model, src, DecodeConfig(sampling="topk", topk=2, samples=2, max_len_a=0.0,
                                     max_len_b=2, no_repeat_ngram=2), prefix):
        hyps = list(hyps)
        starts = [h[:6] for h in hyps]
        assert [4] * 6 in starts and [5, 6] * 3 in starts
        assert all(len(h) <= 6 for h in hyps)  # the budget grows to the prefix, no further
