"""mt/decoding/record.py: what a search records of each output (trace=True) gives the same
confidence features as a teacher-forced pass of the output (mt.confidence.features, the
definition): beam search, greedy and sampling, one model and an ensemble, with a tag, a prefix and
n-best lists; tracing changes no output. Monte Carlo dropout by hand, its seed and its weights."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from test_decoding_rules import beam_search, greedy, random_src, sample, small_model

from mt.confidence import dropout_twin, features, mc_dropout, traced_features
from mt.config import DecodeConfig, ModelConfig
from mt.data import pad
from mt.ensemble import Ensemble
from mt.kernels import logsumexp, logsumexp_entropy
from mt.model import make_model
from mt.vocab import BOS, EOS, PAD

V = 14


def assert_same_features(model, src: torch.Tensor, outputs: list[list[int]], traces, lead=0):
    """traced_features of the search's traces equal the teacher-forced features."""
    rows_src = src
    lengths = (rows_src != PAD).sum(1).tolist()
    traced, traced_lps = traced_features(traces, outputs, lengths, lead)
    forced, forced_lps = features(model, rows_src, outputs, lead)
    for a, b in zip(traced, forced, strict=True):
        assert set(a) == set(b)
        assert a == pytest.approx(b, abs=1e-5)
    for a, b in zip(traced_lps, forced_lps, strict=True):
        assert a == pytest.approx(b, abs=1e-5)


def beam_rows(src: torch.Tensor, found) -> tuple[torch.Tensor, list, list]:
    rows = [b for b, hyps in enumerate(found) for _ in hyps]
    return (src[rows], [h.tokens for hyps in found for h in hyps],
            [h.trace for hyps in found for h in hyps])


@pytest.mark.parametrize("nbest", [1, 3])
@pytest.mark.parametrize("lead", [0, 1])
def test_beam_search_traces_equal_the_teacher_forced_features(nbest, lead):
    model = small_model(V, seed=4)
    src = random_src(4, 7, V, seed=5)
    cfg = DecodeConfig(beam=4, nbest=nbest, max_len_a=1.0, max_len_b=4)
    found = beam_search(model, src, cfg, trace=True)
    assert all(h.trace is not None for hyps in found for h in hyps)
    assert sum(len(hyps) for hyps in found) > 4 or nbest == 1
    assert_same_features(model, *beam_rows(src, found), lead=lead)
    plain = beam_search(model, src, cfg)  # tracing changes nothing the search chooses
    assert [[(h.tokens, h.score) for h in hyps] for hyps in plain] == \
        [[(h.tokens, h.score) for h in hyps] for hyps in found]


def test_beam_search_traces_with_a_forced_prefix_and_a_minimum_length():
    """Constraints set other tokens' scores to -inf; the trace keeps the model's own."""
    model = small_model(V, seed=6)
    src = random_src(3, 6, V, seed=7)
    prefix = pad([[5, 6], [], [7]])
    cfg = DecodeConfig(beam=3, min_len=3, max_len_a=1.0, max_len_b=3, no_repeat_ngram=2)
    found = beam_search(model, src, cfg, prefix, trace=True)
    assert [h.tokens[:2] for h in (found[0][0],)] == [[5, 6]]
    assert_same_features(model, *beam_rows(src, found))


@pytest.mark.parametrize("search", ["greedy", "sample"])
def test_greedy_and_sampling_traces_equal_the_teacher_forced_features(search):
    model = small_model(V, seed=8)
    src = random_src(5, 6, V, seed=9)
    if search == "greedy":
        cfg = DecodeConfig(max_len_a=1.0, max_len_b=5)
        pairs, plain = greedy(model, src, cfg, trace=True), greedy(model, src, cfg)
        rows = src
    else:
        cfg = DecodeConfig(sampling="topk", topk=5, samples=3, max_len_a=1.0, max_len_b=5)
        pairs, plain = sample(model, src, cfg, trace=True), sample(model, src, cfg)
        rows = src.repeat_interleave(3, 0)
    outputs, traces = [y for y, _ in pairs], [t for _, t in pairs]
    assert outputs == plain
    assert_same_features(model, rows, outputs, traces)


def test_an_ensembles_traces_carry_its_members_disagreement():
    models = [small_model(V, seed=10), small_model(V, seed=11)]
    ensemble = Ensemble(models).eval()
    src = random_src(3, 6, V, seed=12)
    found = beam_search(ensemble, src, DecodeConfig(beam=3, max_len_a=1.0, max_len_b=4),
                        trace=True)
    rows, outputs, traces = beam_rows(src, found)
    assert_same_features(ensemble, rows, outputs, traces)
    found, _ = traced_features(traces, outputs, (rows != PAD).sum(1).tolist())
    for b, (y, f) in enumerate(zip(outputs, found, strict=True)):  # by hand, model by model
        means = []
        for m in models:
            lp = torch.log_softmax(m(rows[b: b + 1], torch.tensor([[BOS] + y])), -1)[0]
            means.append(sum(lp[t, tok].item() for t, tok in enumerate(y + [EOS]))
                         / (len(y) + 1))
        assert f["ensemble_disagreement"] == pytest.approx(((means[0] - means[1]) / 2) ** 2,
                                                           rel=1e-4, abs=1e-9)
        assert f["ensemble_disagreement"] > 0  # two different models disagree
    pairs = greedy(ensemble, src, DecodeConfig(max_len_a=1.0, max_len_b=4), trace=True)
    assert_same_features(ensemble, src, [y for y, _ in pairs], [t for _, t in pairs])


def test_logsumexp_and_entropy_by_hand_and_where_a_probability_is_zero():
    logits = torch.randn(40, 30) * 5  # more rows than one slice of ENTROPY_ROWS
    logits[3, 7] = float("-inf")
    lse, h = logsumexp_entropy(logits)
    lp = logits.log_softmax(-1)
    assert torch.allclose(lse, logits.logsumexp(-1), rtol=1e-6)
    assert torch.allclose(logits - lse[:, None], lp, atol=1e-5)
    hand = [-sum(p * q for p, q in zip(r.exp().tolist(), r.tolist(), strict=True) if p > 0)
            for r in lp.double()]
    assert h.tolist() == pytest.approx(hand, abs=1e-6)
    zero, h2 = logsumexp_entropy(lp, normalized=True)
    assert not zero.any() and h2.tolist() == pytest.approx(hand, abs=1e-6)
    assert logsumexp_entropy(torch.tensor([[0.0, float("-inf")]]))[1].tolist() == [0.0]


def test_blocked_logsumexp_is_torchs():
    """mt.kernels.logsumexp (LSE_ROWS rows at a time) equals torch's: rows past one block,
    -inf entries, a row of -inf, large logits."""
    x = torch.randn(70, 300) * 30
    x[3, 7] = float("-inf")
    x[5] = float("-inf")
    x[6] += 1e4
    want = x.logsumexp(-1)
    got = logsumexp(x)
    assert got[5] == float("-inf") and torch.allclose(got, want, rtol=1e-6)


def dropout_model(seed: int):
    torch.manual_seed(seed)
    cfg = ModelConfig(d_model=32, n_heads=4, n_enc_layers=2, n_dec_layers=2, d_ff=64,
                      dropout=0.3, max_positions=64)
    return make_model(cfg, V, V).eval()


def test_mc_dropout_by_hand_seeded_and_leaving_the_model_as_it_was():
    model = dropout_model(13)
    src = pad([[4, 5, 6, 7], [8, 9]])
    outputs = [[4, 5, 6], [7]]
    twin = dropout_twin(model)
    assert not model.training and twin.training
    assert all(a is b for a, b in zip(model.parameters(), twin.parameters(), strict=True))
    state = torch.random.get_rng_state()
    drawn = mc_dropout(twin, src, outputs, passes=4, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's draws untouched
    assert drawn == mc_dropout(twin, src, outputs, passes=4, seed=3)  # same seed, same values
    assert drawn != mc_dropout(twin, src, outputs, passes=4, seed=4)
    torch.manual_seed(3)  # by hand: the same draws, pass after pass
    means = [[], []]
    with torch.no_grad():
        for _ in range(4):
            lp = torch.log_softmax(twin(src, pad([[BOS] + y for y in outputs])), -1)
            for b, y in enumerate(outputs):
                means[b].append(sum(lp[b, t, tok].item() for t, tok in enumerate(y + [EOS]))
                                / (len(y) + 1))
    for d, m in zip(drawn, means, strict=True):
        mean = sum(m) / 4
        assert d["mc_dropout_logprob"] == pytest.approx(mean, abs=1e-5)
        assert d["mc_dropout_variance"] == pytest.approx(sum((x - mean) ** 2 for x in m) / 4,
                                                         abs=1e-7)
        assert d["mc_dropout_variance"] > 0  # dropout moves the scores
    # without dropout every pass is the model itself: no variance, its own log-probability
    still = mc_dropout(dropout_twin(small_model(V, seed=14)), src, outputs, passes=3)
    plain, _ = features(small_model(V, seed=14), src, outputs)
    for d, f in zip(still, plain, strict=True):
        assert d["mc_dropout_variance"] == pytest.approx(0.0, abs=1e-20)
        assert d["mc_dropout_logprob"] == pytest.approx(f["mean_logprob"], abs=1e-5)


def test_a_config_refuses_mc_dropout_without_confidence_or_with_one_pass():
    from mt.config import Config, config_from_dict
    from mt.errors import ConfigError

    raw = dataclasses.asdict(Config())
    for decode, says in (({"mc_dropout": 4}, "needs decode.confidence"),
                         ({"mc_dropout": 1, "confidence": True}, "at least 2 passes")):
        with pytest.raises(ConfigError, match=says):
            config_from_dict({**raw, "decode": {**raw["decode"], **decode}}, "test")
