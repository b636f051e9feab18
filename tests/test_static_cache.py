"""mt/static_cache.py and the step that runs it (mt/decoding/step.py): the search over the
static cache gives what the cache that grows each step gave, for every search and all it
records: greedy identical, beam search the same outputs with scores within 1e-4, on small
random models (whose outputs end at many steps, so rows finish and compact), an
OPUS-MT-shaped one and the toy run. Padded (the shapes a compiled step sees) too."""

from __future__ import annotations

import pytest
import torch
from test_decoding_lexical import random_terms
from test_decoding_rules import beam_search, greedy, random_src, sample, small_model

from conftest import TOY
from mt.config import DecodeConfig, ModelConfig
from mt.decoding import step as steps
from mt.decoding.lexical import Terms
from mt.ensemble import Ensemble
from mt.model import make_model
from mt.static_cache import StaticCache, bucket
from mt.translator import Translator
from mt.vocab import PAD


def both(monkeypatch, run, padded: bool = False):
    """run() with the cache that grows each step, then with the static one (padded: the
    shapes of a compiled step, run eagerly)."""
    monkeypatch.setattr(steps, "STATIC", False)
    before = run()
    monkeypatch.setattr(steps, "STATIC", True)
    if padded:
        monkeypatch.setattr(steps.compiled, "wanted", lambda *a: True)
        monkeypatch.setattr(steps.compiled, "step_of", lambda model: model.decode_static)
    return before, run()


def same_hypotheses(a, b, tol: float = 1e-4) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert [h.tokens for h in x] == [h.tokens for h in y]
        for g, h in zip(x, y, strict=True):
            assert g.held == h.held
            assert g.score == pytest.approx(h.score, abs=tol, nan_ok=True)
            if g.attention is not None:
                assert torch.allclose(g.attention, h.attention, atol=1e-5)
            if g.trace is not None:
                assert g.trace.logprobs == pytest.approx(h.trace.logprobs, abs=tol)
                assert g.trace.entropy == pytest.approx(h.trace.entropy, abs=tol)
                assert g.trace.received == pytest.approx(h.trace.received, abs=1e-5)


def test_the_ladder_pads_by_less_than_half_and_has_few_rungs():
    rungs = sorted({bucket(n) for n in range(1, 1025)})
    assert rungs[:9] == [1, 2, 3, 4, 6, 8, 12, 16, 24] and len(rungs) == 20
    assert all(n <= bucket(n) < 1.5 * n or n <= 2 for n in range(1, 1025))


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_greedy_and_sampling_are_the_same_outputs(monkeypatch, seed, padded):
    V = 12
    model, src = small_model(V, seed), random_src(9, 9, V, seed)
    cfg = DecodeConfig(max_len_a=1.0, max_len_b=4, no_repeat_ngram=3 if seed % 2 else 0)
    prefix = torch.full((9, 2), PAD)
    prefix[::2, 0], prefix[::4, 1] = 5, 6
    a, b = both(monkeypatch, lambda: greedy(model, src, cfg, prefix, trace=True), padded)
    assert [t for t, _ in a] == [t for t, _ in b]
    assert len({len(t) for t, _ in a}) > 2  # rows end at many steps: the cache compacts
    for (_, x), (_, y) in zip(a, b, strict=True):
        assert x.logprobs == pytest.approx(y.logprobs, abs=1e-5)
    drawn = DecodeConfig(sampling="topk", topk=4, samples=3, seed=seed, max_len_b=6)
    a, b = both(monkeypatch, lambda: sample(model, src, drawn), padded)
    assert a == b


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_beam_search_keeps_outputs_scores_attention_and_traces(monkeypatch, seed, padded):
    V = 12
    model, src = small_model(V, seed), random_src(6, 7, V, seed)
    cfg = DecodeConfig(beam=4, nbest=3, max_len_a=1.0, max_len_b=3,
                       no_repeat_ngram=2 if seed % 2 else 0)
    prefix = torch.full((6, 1), PAD)
    prefix[1::3, 0] = 7
    same_hypotheses(*both(monkeypatch, lambda: beam_search(
        model, src, cfg, prefix, attend=True, trace=True), padded))
    terms = Terms.of(random_terms(6, V, seed), False, "cpu")
    same_hypotheses(*both(monkeypatch, lambda: beam_search(model, src, cfg, terms=terms),
                          padded))


@pytest.mark.parametrize("beam", [1, 3])
def test_an_ensemble_steps_each_member_on_its_own_cache(monkeypatch, beam):
    V = 12
    pair = Ensemble([small_model(V, 1), small_model(V, 2, d_model=16)])
    src = random_src(6, 6, V, 3)
    cfg = DecodeConfig(beam=beam, max_len_a=1.0, max_len_b=3)
    a, b = both(monkeypatch, lambda: beam_search(pair, src, cfg, trace=True) if beam > 1
                else [[h] for h in greedy(pair, src, cfg)])
    if beam == 1:
        assert a == b
    else:
        same_hypotheses(a, b)
        assert isinstance(pair.start_cache(pair.encode(src, pair.src_mask(src)),
                                           pair.src_mask(src)).to_static(4).caches[1],
                          StaticCache)


def opus_shaped(seed: int = 0):
    """A random model of OPUS-MT's shape: d 512, 6 + 6 layers, 8 heads, a 58k vocabulary."""
    torch.manual_seed(seed)
    cfg = ModelConfig(d_model=512, n_heads=8, d_ff=2048, n_enc_layers=6, n_dec_layers=6,
                      max_positions=256, tie_output=True)
    return make_model(cfg, 58_000, 58_000).eval()


@pytest.mark.parametrize("lines", [pytest.param(4, id="4"),
                                   pytest.param(200, id="200", marks=pytest.mark.slow)])
def test_an_opus_mt_shaped_model_greedy_is_identical(monkeypatch, lines):
    model = opus_shaped()
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(3, 12, (lines,), generator=g)  # short: 200 lines in seconds
    src = torch.full((lines, int(lengths.max())), PAD)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(4, 58_000, (n,), generator=g)
    cfg = DecodeConfig(max_len_a=0.5, max_len_b=3)
    for part in src.split(32):
        a, b = both(monkeypatch, lambda part=part: greedy(model, part, cfg))
        assert a == b


def test_the_toy_run_translates_the_same(monkeypatch, tiny_run):
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()
    for beam in (1, 3):
        tr = Translator.load(tiny_run, "cpu", beam=beam, compile="off")
        a, b = both(monkeypatch, lambda tr=tr: tr.translate(lines))
        assert a == b
