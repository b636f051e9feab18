"""mt/decoding/sampling.py: sampling (top-k, top-p, temperature, seeds) and repetition blocking,
on small random models; the options' checks; `mt translate --samples` on a trained run."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from test_decoding_rules import beam_search, greedy, random_src, sample, small_model

from conftest import TOY, assert_user_error
from mt.config import ConfigError, DecodeConfig, load_config
from mt.decoding.sampling import draw, nucleus

LONG = DecodeConfig(max_len_a=0.0, max_len_b=30)  # long outputs: many draws per line


def sampled(cfg: DecodeConfig = LONG, **changes) -> DecodeConfig:
    return dataclasses.replace(cfg, **{"sampling": "topk", **changes})


def has_repeat(tokens: list[int], n: int) -> bool:
    grams = [tuple(tokens[i: i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


@pytest.mark.parametrize("how", ["topk", "topp"])
def test_sampling_near_zero_temperature_is_greedy(how):
    model, src = small_model(12, 0), random_src(5, 6, 12, 0)
    want = greedy(model, src, DecodeConfig(max_len_a=0.0, max_len_b=30))
    assert sample(model, src, sampled(sampling=how, temperature=1e-4)) == want
    assert sample(model, src, sampled(sampling=how, temperature=2.0)) != want  # so it can fail


def test_seed_fixes_the_samples_and_batching_does_not_change_them():
    model, src = small_model(12, 1), random_src(4, 6, 12, 1)
    cfg = sampled(sampling="topp", topp=0.95, samples=3, temperature=1.5)
    first = sample(model, src, cfg)
    assert len(first) == 4 * 3
    assert sample(model, src, cfg) == first
    assert sample(model, src, dataclasses.replace(cfg, seed=1)) != first
    assert len({tuple(h) for h in first[:3]}) > 1  # a line's samples are drawn apart
    for i in range(4):  # each line alone (its own padding): the same samples
        alone = src[i: i + 1, : int((src[i] != 0).sum())]
        assert sample(model, alone, cfg) == first[3 * i: 3 * i + 3]


def drawn(seed_model: int, cfg: DecodeConfig) -> list[tuple[torch.Tensor, int]]:
    """(the step's logits (V,), the token drawn) at every step of one sampled output for each of
    6 random sources, on a small random model, the seed going with the source."""
    model = small_model(16, seed_model)
    steps: list[torch.Tensor] = []
    hook = model.generator.register_forward_hook(lambda mod, args, out: steps.append(out[0]))
    found = []
    try:
        for s in range(6):
            steps.clear()
            out = sample(model, random_src(1, 5, 16, s), dataclasses.replace(cfg, seed=s))[0]
            found += [(steps[t], token) for t, token in enumerate(out)]
    finally:
        hook.remove()
    return found


def test_topk_never_draws_outside_the_k_best():
    k, outside_argmax = 3, 0
    for logits, token in drawn(2, sampled(topk=k, temperature=3.0)):
        best = logits.topk(k).indices.tolist()
        assert token in best, (token, best)
        outside_argmax += token != best[0]
    assert outside_argmax > 0  # it does sample, not only take the argmax


def test_topp_never_draws_outside_the_nucleus():
    p, temperature, outside_argmax = 0.6, 2.0, 0
    for logits, token in drawn(3, sampled(sampling="topp", topp=p, temperature=temperature)):
        probs = (logits.float() / temperature).softmax(-1)
        more_likely = probs[probs > probs[token]].sum()
        assert more_likely < p, (token, float(more_likely))
        outside_argmax += token != int(probs.argmax())
    assert outside_argmax > 0  # it does sample, not only take the argmax


def test_topp_keeps_the_smallest_set_that_reaches_p():
    probs = torch.tensor([[0.05, 0.5, 0.15, 0.3]])  # the set does not depend on the order
    for p, best in ((0.3, 1), (0.5, 1), (0.75, 2), (0.9, 3), (0.96, 4), (1.0, 4)):
        got = nucleus(probs, p)
        assert got.tolist() == [[rank < best for rank in (3, 0, 2, 1)]], p


def test_draw_keeps_a_draw_inside_the_nucleus_and_redraws_one_outside():
    logits = torch.tensor([0.5, 0.3, 0.15, 0.05]).log().expand(4, -1)  # nucleus of 0.75: 0, 1
    u = torch.tensor([[0.0, 0.9], [0.6, 0.9], [0.9, 0.7], [0.99, 0.1]])
    cfg = DecodeConfig(sampling="topp", topp=0.75)
    # rows 0, 1: the first uniform draws 0 and 1 from the whole row, both inside: kept;
    # rows 2, 3: it draws 2 and 3, outside: the second inverts the cut 0.5/0.8, 0.3/0.8
    assert draw(logits, cfg, u).tolist() == [0, 1, 1, 0]


def test_topp_draws_follow_the_renormalised_nucleus():
    probs = torch.tensor([0.4, 0.25, 0.2, 0.1, 0.05])  # nucleus of 0.8: 0, 1, 2 (0.85)
    n = 40_000
    u = torch.rand(n, 2, generator=torch.Generator().manual_seed(0))
    got = draw(probs.log().expand(n, -1), DecodeConfig(sampling="topp", topp=0.8), u)
    freq = torch.bincount(got, minlength=5).float() / n
    want = torch.tensor([0.4, 0.25, 0.2, 0.0, 0.0]) / 0.85
    assert (freq - want).abs().max() < 0.01, freq


@pytest.mark.parametrize("n", [1, 2, 3])
def test_no_repeat_ngram_in_greedy_beam_and_sampling(n):
    model, src = small_model(40, 3), random_src(4, 6, 40, 3)  # untrained: it repeats
    runs = {
        "greedy": lambda c: greedy(model, src, c),
        "beam": lambda c: [h[0].tokens for h in beam_search(model, src, c)],
        "sample": lambda c: sample(model, src, c),
    }
    for name, run in runs.items():
        cfg = dataclasses.replace(sampled() if name == "sample" else LONG, no_repeat_ngram=n,
                                  beam=4 if name == "beam" else 1, length_norm="none")
        assert any(has_repeat(h, n) for h in run(dataclasses.replace(cfg, no_repeat_ngram=0)))
        outs = run(cfg)
        assert not any(has_repeat(h, n) for h in outs), (name, outs)
        assert any(len(h) > 2 * n for h in outs)  # long enough to have repeated


@pytest.mark.parametrize("item, blamed", [
    ("decode.topk=0", "decode.topk must be positive"),
    ("decode.topp=0", "decode.topp must be in (0, 1]"),
    ("decode.topp=1.01", "decode.topp must be in (0, 1]"),
    ("decode.temperature=0", "decode.temperature must be positive"),
    ("decode.samples=0", "decode.samples must be at least 1"),
    ("decode.samples=2", "decode.samples > 1 needs decode.sampling"),
    ("decode.no_repeat_ngram=-1", "decode.no_repeat_ngram must be 0 (off) or positive"),
    ("decode.beam=4", "needs decode.beam 1"),
])
def test_bad_sampling_settings_are_config_errors(item, blamed):
    sampling = [] if item.startswith("decode.samples=2") else ["decode.sampling=topk"]
    with pytest.raises(ConfigError) as e:
        load_config(None, [*sampling, item])
    assert str(e.value).startswith(f"--set {item}: "), e.value
    assert blamed in str(e.value)


@pytest.mark.parametrize("engine", ["mt", "ctranslate2"])
def test_translate_samples_in_the_nbest_format(tiny_run, cli, tmp_path, engine):
    if engine == "ctranslate2":
        pytest.importorskip("ctranslate2")
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:4]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = ["translate", tiny_run, "-i", src, "--engine", engine, "--set", "decode.sampling=topk",
            "--set", "decode.samples=3"]
    r = cli(*args)
    assert r.code == 0, r.err
    rows = [line.split("\t") for line in r.out.splitlines()]
    assert [int(i) for i, _, _ in rows] == [i for i in range(4) for _ in range(3)]
    assert all(float(score) <= 0 for _, score, _ in rows)
    assert cli(*args).out == r.out  # the default seed, the same samples
    assert_user_error(cli(*args, "--topk", "0"), 3, "--topk 0: decode.topk must be positive")


def test_the_nucleus_equals_a_full_sorts_for_peaked_and_flat_rows():
    """Binned, not sorted: the same set as the definition (mass before a token < p) computed
    over a full sort, for peaked rows (a few tokens), flat rows (hundreds, many in one bin) and
    rows with underflowing tokens, in one batch."""
    g = torch.Generator().manual_seed(0)
    logits = torch.cat([torch.randn(8, 3000, generator=g) * scale for scale in (30, 8, 1, 0.01)])
    probs = logits.softmax(-1)
    assert (probs[:8] == 0).any()  # underflow
    for p in (0.1, 0.5, 0.9, 0.99):
        ordered, ids = probs.sort(-1, descending=True)
        reference = torch.zeros_like(probs, dtype=torch.bool).scatter_(
            1, ids, ordered.cumsum(-1) - ordered < p)
        got = nucleus(probs, p)
        assert torch.equal(got, reference), (p, (got != reference).sum())
        sizes = got.sum(-1)
        assert sizes[:8].max() < sizes[-8:].min()  # peaked rows keep fewer than flat ones
