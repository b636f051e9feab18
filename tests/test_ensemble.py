"""mt/ensemble.py and ensembles in the Translator and the CLI: a model with itself is that model,
beam search over two models is exact (each model's cache reordered), the ensemble of two toy
models is no worse than the worse one (tests/test_runs.py: runs that cannot be ensembled)."""

from __future__ import annotations

import copy
import itertools
import json

import pytest
import torch
from test_decoding_rules import (
    beam_search,
    greedy,
    random_src,
    sample,
    small_model,
    teacher_forced_logprob,
)

from mt.config import DecodeConfig
from mt.decoding.scores import length_penalty, sequence_scores
from mt.ensemble import Ensemble
from mt.vocab import EOS, PAD


def _found(hyps):
    return [[(h.tokens, h.score) for h in n] for n in hyps]


def assert_same_beams(a, b):
    """The same hypotheses, their scores equal up to float order (a model's beam search ranks
    its logits less their logsumexp, an ensemble's its mean log-probabilities)."""
    assert [[h.tokens for h in n] for n in a] == [[h.tokens for h in n] for n in b]
    assert [h.score for n in a for h in n] == pytest.approx([h.score for n in b for h in n],
                                                            abs=1e-5)


@pytest.mark.parametrize("seed", range(2))
def test_an_ensemble_of_a_model_with_itself_is_that_model(seed):
    V = 8
    model, src = small_model(V, seed), random_src(6, 7, V, seed)
    twice = Ensemble([model, copy.deepcopy(model)]).eval()
    out = greedy(model, src, DecodeConfig(max_len_a=1.0, max_len_b=3))
    assert greedy(twice, src, DecodeConfig(max_len_a=1.0, max_len_b=3)) == out
    for cfg in (DecodeConfig(beam=4, nbest=3, max_len_a=1.0, max_len_b=3),
                DecodeConfig(beam=3, length_norm="none", no_repeat_ngram=2, min_len=2)):
        assert_same_beams(beam_search(twice, src, cfg), beam_search(model, src, cfg))
        assert sequence_scores(twice, src, out, cfg) == sequence_scores(model, src, out, cfg)
    cfg = DecodeConfig(sampling="topk", topk=3, samples=2, seed=seed)
    assert sample(twice, src, cfg) == sample(model, src, cfg)
    assert len({len(h) for h in out}) > 1  # outputs end at varied steps: rows leave the cache


def test_wide_beam_over_two_models_equals_exhaustive_search_of_their_mean():
    """As test_decode's exhaustive check, over the mean of two different models'
    log-probabilities: every model's cache must follow the beams (and the rows that leave)."""
    V, L, K, n = 7, 3, 150, 4  # 5 tokens besides <eos> and <pad>, as many as K holds
    content = [t for t in range(V) if t not in (PAD, EOS)]
    beats_each = 0
    for seed in range(3):
        # untied: a tied output favours its input token (<bos>) over every other
        models = [small_model(V, seed + 10 * j, d_model=16 * (j + 1), tie_output=False)
                  for j in range(2)]
        with torch.no_grad():
            for m in models:
                m.generator.weight *= 3  # peaked distributions: a less uniform problem
        src = random_src(3, 5, V, seed)
        cfg = DecodeConfig(beam=K, nbest=n, length_norm="gnmt", length_penalty=1.0,
                           max_len_a=0.0, max_len_b=L)
        found = beam_search(Ensemble(models).eval(), src, cfg)
        outputs = [list(y) for m in range(L + 1) for y in itertools.product(content, repeat=m)]
        lp = torch.tensor([length_penalty(len(y) + 1, "gnmt", 1.0) for y in outputs])
        for i in range(src.size(0)):
            s = src[i:i + 1, : int((src[i] != 0).sum())]
            each = [teacher_forced_logprob(m, s, outputs) / lp for m in models]
            scores = torch.stack(each).mean(0)
            top = scores.topk(n).indices.tolist()
            assert [h.tokens for h in found[i]] == [outputs[j] for j in top]
            assert [h.score for h in found[i]] == pytest.approx(scores[top].tolist(), abs=1e-4)
            beats_each += all(int(e.argmax()) != top[0] for e in each)
    assert beats_each > 0  # the ensemble's best is sometimes neither model's: the mean matters


@pytest.mark.slow
def test_an_ensemble_of_two_toy_models_is_no_worse_than_the_worse(cli, tiny_run, other_run):
    def bleu(*runs, beam=1):
        r = cli("eval", *map(str, runs), "--split", "val", "--beam", str(beam), "--json")
        assert r.code == 0, r.err
        return json.loads(r.out)["bleu"]

    one, two = bleu(tiny_run), bleu(other_run)
    assert bleu(tiny_run, other_run) >= min(one, two)
    assert bleu(tiny_run, other_run, beam=4) >= min(one, two)
    assert bleu(tiny_run, tiny_run) == one


@pytest.mark.slow
def test_translate_an_ensemble_with_workers_equals_one_process(cli, tiny_run, other_run):
    lines = "Today you have eight hundred seventy nine cats.\nWe have two dogs.\n"
    one = cli("translate", str(tiny_run), str(other_run), "--nbest", "2", "--beam", "3",
              stdin=lines.encode())
    assert one.code == 0, one.err
    two = cli("translate", str(tiny_run), str(other_run), "--nbest", "2", "--beam", "3",
              "--workers", "2", stdin=lines.encode())
    assert two.out == one.out and len(one.out.splitlines()) == 4


def test_an_int8_ensemble_without_a_fast_kernel_warns_and_decodes_in_float32(tiny_run,
                                                                             monkeypatch, capsys):
    """The ensemble's int8 copy is made as one model's is (tests/test_decoding_precision.py
    checks it where the CPU has the kernels); here, where it falls back."""
    from mt.decoding import precision
    from mt.translator import Translator

    if not precision.quantizable():
        pytest.skip("this torch build has no quantized linear")
    monkeypatch.setattr(precision, "cpu_has_int8", lambda: False)
    lines = ["Yesterday we saw forty two red dogs.", "Today you have eight cats."]
    pair = Translator.load([tiny_run, tiny_run], dtype="int8", beam=3)
    assert "no fast int8 kernel" in capsys.readouterr().err
    assert pair.translate(lines) == Translator.load(tiny_run, beam=3).translate(lines)
