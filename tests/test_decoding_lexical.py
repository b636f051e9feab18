"""mt/decoding/lexical.py: lexically constrained beam search (through the beam rule): every
term held, in order when ordered, the batch equal to each line alone, no terms the plain search,
and a wide beam equal to exhaustive search over the outputs that hold the terms."""

from __future__ import annotations

import itertools
import random

import pytest
import torch
from test_decoding_rules import (
    CONTENT,
    beam_search,
    random_src,
    small_model,
    teacher_forced_logprob,
)

from mt.config import DecodeConfig
from mt.decoding.lexical import Terms
from mt.decoding.scores import length_penalty
from mt.vocab import PAD


def holds(tokens: list[int], term: list[int], start: int = 0) -> int:
    """Where term ends after its first occurrence in tokens from start; -1 if none."""
    for i in range(start, len(tokens) - len(term) + 1):
        if tokens[i:i + len(term)] == term:
            return i + len(term)
    return -1


def random_terms(B: int, V: int, seed: int) -> list[list[list[int]]]:
    rng = random.Random(seed)
    return [[[rng.randrange(4, V) for _ in range(rng.randint(1, 3))]
             for _ in range(rng.randint(0, 3))] for _ in range(B)]


def alone(model, src: torch.Tensor, i: int) -> torch.Tensor:
    return src[i:i + 1, : int((src[i] != PAD).sum())]


@pytest.mark.parametrize("ordered", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_every_term_is_held_and_in_order_when_ordered(seed, ordered):
    V = 12
    model, src = small_model(V, seed), random_src(5, 6, V, seed)
    terms = random_terms(5, V, seed)
    cfg = DecodeConfig(beam=4, nbest=2, max_len_a=1.0, max_len_b=2)
    found = beam_search(model, src, cfg, terms=Terms.of(terms, ordered, "cpu"))
    for hyps, wanted in zip(found, terms, strict=True):
        assert hyps[0].held  # the best; the n-best may add some cut by the limit, said so
        for h in (h for h in hyps if h.held):
            at = 0
            for term in wanted:
                end = holds(h.tokens, term, at if ordered else 0)
                assert end >= 0, (h.tokens, wanted)
                at = end if ordered else 0


def test_no_term_is_the_plain_search():
    V = 12
    model, src = small_model(V, 1), random_src(4, 6, V, 1)
    cfg = DecodeConfig(beam=4, nbest=3)
    assert Terms.of([[], [], [], []], False, "cpu") is None
    plain = beam_search(model, src, cfg)
    # a line without terms in a batch with terms: the plain search's hypotheses, scores too
    mixed = beam_search(model, src, cfg, terms=Terms.of([[], [[5, 6]], [], []], False, "cpu"))
    for i in (0, 2, 3):
        assert mixed[i] == plain[i]
    assert mixed[1] != plain[1]


@pytest.mark.parametrize("seed", range(3))
def test_a_batch_equals_each_line_alone(seed):
    V = 12
    model, src = small_model(V, seed), random_src(6, 7, V, seed)
    terms = random_terms(6, V, seed + 10)
    cfg = DecodeConfig(beam=5, nbest=3, max_len_a=1.0, max_len_b=3)
    batch = beam_search(model, src, cfg, terms=Terms.of(terms, False, "cpu"))
    for i in range(6):
        one = beam_search(model, alone(model, src, i), cfg,
                          terms=Terms.of(terms[i:i + 1], False, "cpu"))
        assert [h.tokens for h in one[0]] == [h.tokens for h in batch[i]]
        assert [h.score for h in one[0]] == pytest.approx([h.score for h in batch[i]], abs=1e-5)


def test_a_length_limit_too_short_for_the_terms_is_said():
    V = 12
    model, src = small_model(V, 2), random_src(1, 4, V, 2)
    # the budget grows to hold the terms, up to the model's positions (64)
    long = [[[5] * 40, [6] * 40]]
    found = beam_search(model, src, DecodeConfig(beam=3, max_len_a=0.0, max_len_b=3),
                        terms=Terms.of(long, False, "cpu"))
    assert not found[0][0].held and len(found[0][0].tokens) == 63


@pytest.mark.parametrize("norm,alpha", [("none", 0.0), ("gnmt", 0.6), ("gnmt", 2.0)])
def test_wide_beam_equals_exhaustive_constrained_search(norm, alpha):
    """V=6: outputs of at most L=3 tokens from 4 content tokens. With K = 150 every prefix
    stays live and every ending is dealt a place, so the constrained beam must return the
    best output that holds the terms (in order, when ordered)."""
    V, L, K = 6, 3, 150
    outputs = [list(y) for m in range(L + 1) for y in itertools.product(CONTENT, repeat=m)]
    lp = torch.tensor([length_penalty(len(y) + 1, norm, alpha) for y in outputs])
    rng, checked = random.Random(0), 0
    for seed in range(3):
        model = small_model(V, seed, d_model=16)
        with torch.no_grad():
            model.generator.weight *= 3
        src = random_src(3, 5, V, seed)
        for ordered in (False, True):
            terms = [[[rng.choice(CONTENT[2:])] for _ in range(rng.randint(1, 2))]
                     + ([[CONTENT[2], CONTENT[3]]] if i == 2 else []) for i in range(3)]
            terms = [[list(t) for t in dict.fromkeys(map(tuple, ts))] for ts in terms]
            cfg = DecodeConfig(beam=K, length_norm=norm, length_penalty=alpha, max_len_a=0.0,
                               max_len_b=L)
            found = beam_search(model, src, cfg, terms=Terms.of(terms, ordered, "cpu"))
            for i in range(3):
                ok = []
                for y in outputs:
                    at, good = 0, True
                    for term in terms[i]:
                        end = holds(y, term, at if ordered else 0)
                        good, at = good and end >= 0, end if ordered else 0
                    ok.append(good)
                if sum(map(len, terms[i])) > L:  # the budget grows past L: not enumerated
                    continue
                checked += 1
                scores = teacher_forced_logprob(model, alone(model, src, i), outputs) / lp
                scores[~torch.tensor(ok)] = float("-inf")
                best = int(scores.argmax())
                assert found[i][0].tokens == outputs[best], (terms[i], ordered)
                assert found[i][0].score == pytest.approx(float(scores[best]), abs=1e-4)
    assert checked >= 15
