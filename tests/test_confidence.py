"""mt/confidence.py: the features against hand computations on a tiny random model, their
determinism, the calibration's fit against a known mapping, its file and its checks, ECE and
Spearman by hand; on the toy model, a planted omission lowers the coverage."""

from __future__ import annotations

import json
import math
import re
import shutil
import zlib
from dataclasses import asdict

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_decoding_rules import small_model

from mt.confidence import (
    CALIBRATION,
    FEATURES,
    Calibration,
    calibrate,
    ece,
    features,
    fit_logistic,
    for_run,
    model_inputs,
    spearman,
    weights_fingerprint,
    word_probabilities,
)
from mt.data import pad
from mt.errors import CheckpointError
from mt.vocab import BOS, EOS

V = 12


def by_hand(model, src_row: list[int], y: list[int], lead: int) -> dict[str, float]:
    """The features of one (source, output) pair, unpadded, from plain torch calls."""
    src = torch.tensor([src_row])
    tgt_in = torch.tensor([[BOS] + y])
    with torch.no_grad():
        lp = F.log_softmax(model(src, tgt_in).float(), -1)[0]  # (T+1, V)
        layers = model.cross_attention(src, tgt_in)  # per layer (1, H, T+1, S)
    picked = [lp[t, tok].item() for t, tok in enumerate(y + [EOS])]
    entropy = [-(lp[t].exp() * lp[t]).sum().item() for t in range(len(y) + 1)]
    attn = sum(w[0].mean(0) for w in layers) / len(layers)  # (T+1, S)
    received = attn.sum(0)[lead:]
    bigrams = list(zip(y, y[1:]))
    seen, repeats = set(), 0
    for g in bigrams:
        repeats += g in seen
        seen.add(g)
    return {"mean_logprob": sum(picked) / len(picked), "min_logprob": min(picked),
            "mean_entropy": sum(entropy) / len(entropy),
            "length_ratio": len(y) / (len(src_row) - lead),
            "coverage": sum(min(1.0, r.item()) for r in received) / len(received),
            "repetition": repeats / max(len(bigrams), 1),
            "src_tokens": float(len(src_row) - lead)}


def test_features_equal_hand_computations_each_row_alone():
    model = small_model(V, seed=1)
    sources = [[4, 5, 6, 7, 8], [9, 4], [5, 5, 6, 10, 11, 4, 7]]
    outputs = [[4, 5, 4, 5, 4], [6], [7, 8, 9, 10, 11, 7, 8]]  # repeats: 2/4, none, 1/6
    for lead in (0, 1):  # a tag token first: not part of the source's features
        found, lps = features(model, pad(sources), outputs, lead)
        for row, y, f, lp in zip(sources, outputs, found, lps, strict=True):
            hand = by_hand(model, row, y, lead)
            assert set(f) == set(FEATURES)
            for key in FEATURES:
                assert f[key] == pytest.approx(hand[key], abs=1e-5), key
            assert len(lp) == len(y) + 1 and min(lp) == pytest.approx(f["min_logprob"])
        assert found[0]["repetition"] == 0.5 and found[2]["repetition"] == pytest.approx(1 / 6)
        assert found[1]["repetition"] == 0.0  # one token: no bigram


def test_features_are_deterministic():
    model = small_model(V, seed=2)
    src = pad([[4, 5, 6], [7, 8, 9, 10]])
    outputs = [[4, 4, 5], [6, 7]]
    assert features(model, src, outputs) == features(model, src, outputs)


def test_the_logistic_fit_recovers_a_known_mapping():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20000, 3))
    w_true, b_true = np.array([1.5, -2.0, 0.0]), 0.5
    p = 1 / (1 + np.exp(-(x @ w_true + b_true)))
    y = (rng.random(len(p)) < p).astype(float)
    w, b = fit_logistic(x, y, l2=1e-6)
    assert np.abs(w - w_true).max() < 0.1 and abs(b - b_true) < 0.1
    # separable data: the penalty keeps the weights finite
    w, b = fit_logistic(x[:, :1], (x[:, 0] > 0).astype(float))
    assert np.isfinite(w).all() and w[0] > 5


def synthetic(n: int, seed: int) -> tuple[list[dict], list[float]]:
    """Features of n lines, and chrF scores that rise with mean_logprob (and noise)."""
    rng = np.random.default_rng(seed)
    rows, chrf = [], []
    for _ in range(n):
        lp = rng.uniform(-2, 0)
        rows.append({"mean_logprob": lp, "min_logprob": lp - rng.uniform(0, 3),
                     "mean_entropy": rng.uniform(0, 3), "length_ratio": rng.uniform(0.8, 1.2),
                     "coverage": rng.uniform(0.5, 1), "repetition": 0.0,
                     "src_tokens": float(rng.integers(3, 30))})
        chrf.append(50 + 30 * (lp + 1) + rng.normal(0, 10))
    return rows, chrf


def test_calibration_predicts_the_observed_share_on_new_lines():
    rows, chrf = synthetic(4000, 0)
    cal = calibrate(rows, chrf, 50.0, checkpoint="best.pt", step=7)
    assert cal.lines == 4000 and 0.4 < cal.positives < 0.6
    test_rows, test_chrf = synthetic(4000, 1)
    probs = np.array(cal.predict(test_rows))
    good = np.array(test_chrf) >= 50
    assert ece(probs, good) < 0.03
    # the truth: P(50 + 30 (lp + 1) + N(0, 10) >= 50) = Phi(3 (lp + 1))
    lps = np.array([r["mean_logprob"] for r in test_rows])
    truth = np.array([0.5 * (1 + math.erf(3 * (v + 1) / math.sqrt(2))) for v in lps])
    assert np.abs(probs - truth).mean() < 0.05
    assert spearman(probs, np.array(test_chrf)) > 0.6


def test_ece_and_spearman_by_hand():
    probs = np.array([0.05, 0.15, 0.12, 0.95])  # bins 0, 1, 1, 9
    good = np.array([0, 1, 0, 1])
    # bin 0: |0.05 - 0| * 1/4; bin 1: |0.135 - 0.5| * 2/4; bin 9: |0.95 - 1| * 1/4
    assert ece(probs, good) == pytest.approx(0.05 / 4 + 0.365 / 2 + 0.05 / 4)
    assert spearman(np.array([1, 2, 3, 4.0]), np.array([10, 20, 30, 40.0])) == pytest.approx(1)
    # ties share their mean rank: ranks [0.5, 0.5, 2, 3] against [0, 1, 2, 3]
    expected = np.corrcoef([0.5, 0.5, 2, 3], [0, 1, 2, 3])[0, 1]
    assert spearman(np.array([1, 1, 2, 3.0]), np.array([1, 2, 3, 4.0])) == pytest.approx(expected)


def test_the_calibration_file_round_trips_and_is_checked(tmp_path, capsys):
    rows, chrf = synthetic(300, 2)
    cal = calibrate(rows, chrf, 50.0, checkpoint="best.pt", step=7)
    path = cal.save(tmp_path)
    assert path == tmp_path / CALIBRATION
    assert Calibration.load(path) == cal
    assert for_run(tmp_path / "best.pt", 7) == cal
    assert for_run(tmp_path / "best.pt", 8) is None  # fitted for another step: not used
    assert "fitted for best.pt at step 7, not best.pt at step 8" in capsys.readouterr().err
    assert for_run(tmp_path / "other" / "best.pt", 7) is None  # none beside it
    raw = json.loads(path.read_text())
    raw["calibration"]["bias"] += 1.0  # an edit the CRC-32 catches
    path.write_text(json.dumps(raw))
    with pytest.raises(CheckpointError, match="damaged calibration .*CRC-32"):
        Calibration.load(path)
    path.write_text(path.read_text()[:50])  # truncated
    with pytest.raises(CheckpointError, match="damaged calibration"):
        for_run(tmp_path / "best.pt", 7)


@pytest.mark.parametrize("field, value, message", [
    ("weights", ["x"] * 8, "weights holds 'x', not a finite number"),
    ("weights", [float("nan")] * 8, "weights holds nan"),
    ("bias", None, "bias holds None"),
    ("scale", [1.0] * 3, "expected 8 scale"),
    ("bounds", {"coverage": ["low", 1.0]}, "bounds.coverage holds 'low'"),
])
def test_a_calibration_with_a_matching_crc_but_unusable_values_is_damaged(tmp_path, field, value,
                                                                         message):
    rows, chrf = synthetic(300, 2)
    body = asdict(calibrate(rows, chrf, 50.0, checkpoint="best.pt", step=7))
    body[field] = value
    text = json.dumps(body, sort_keys=True)  # NaN written as JSON's NaN, as a hand edit would
    (tmp_path / CALIBRATION).write_text(json.dumps(
        {"format": 1, "crc32": zlib.crc32(text.encode()), "calibration": body}))
    with pytest.raises(CheckpointError, match=f"damaged calibration .*{re.escape(message)}"):
        Calibration.load(tmp_path / CALIBRATION)


def test_a_calibration_beside_other_weights_of_the_same_name_and_step_is_not_used(tmp_path,
                                                                                 capsys):
    mine, other = tmp_path / "mine", tmp_path / "other"
    for directory, seed in ((mine, 0), (other, 1)):
        directory.mkdir()
        torch.manual_seed(seed)
        torch.save({"model": {"w": torch.randn(4, 4)}, "step": 7}, directory / "best.pt")
    rows, chrf = synthetic(300, 2)
    cal = calibrate(rows, chrf, 50.0, checkpoint="best.pt", step=7,
                    fingerprint=weights_fingerprint(mine / "best.pt"))
    cal.save(mine)
    assert for_run(mine / "best.pt", 7) == cal
    shutil.copy(mine / "best.pt", tmp_path / "copy.pt")  # the same weights elsewhere: the same
    assert weights_fingerprint(tmp_path / "copy.pt") == cal.fingerprint
    cal.save(other)  # copied to a run whose checkpoint has the same name and step
    assert for_run(other / "best.pt", 7) is None
    assert "fitted for other weights than best.pt's" in capsys.readouterr().err


def test_model_inputs_take_the_length_ratio_on_a_log_scale():
    row = dict.fromkeys(FEATURES, 0.0) | {"length_ratio": math.e, "src_tokens": 9.0}
    x = model_inputs([row])[0]
    assert x[3] == pytest.approx(1.0) and x[4] == pytest.approx(1.0)
    assert x[7] == pytest.approx(math.log(10))


def test_an_ensemble_of_one_model_twice_has_that_models_features():
    from mt.ensemble import Ensemble

    model = small_model(V, seed=3)
    src = pad([[4, 5, 6], [7, 8, 9, 10]])
    outputs = [[4, 4, 5], [6, 7]]
    alone, lp_alone = features(model, src, outputs)
    twice, lp_twice = features(Ensemble([model, model]).eval(), src, outputs)
    for a, b in zip(alone, twice, strict=True):
        assert b.pop("ensemble_disagreement") == pytest.approx(0.0, abs=1e-10)  # they agree
        assert b == pytest.approx(a, abs=1e-5)
    assert lp_twice == [pytest.approx(x, abs=1e-5) for x in lp_alone]


def test_flags_name_the_features_outside_what_the_held_out_set_showed():
    rows, chrf = synthetic(1000, 3)
    cal = calibrate(rows, chrf, 50.0, checkpoint="best.pt", step=1)
    cov = sorted(r["coverage"] for r in rows)
    assert cal.bounds["coverage"][0] == pytest.approx(np.percentile(cov, 1))
    assert cal.bounds["coverage"][1] is None and cal.bounds["repetition"][0] is None
    usual = rows[0] | {"coverage": 0.9, "length_ratio": 1.0}
    assert cal.flags(usual) == []
    odd = usual | {"coverage": 0.1, "repetition": 0.5, "length_ratio": 3.0}
    assert cal.flags(odd) == ["coverage", "repetition", "length_ratio"]
    assert cal.flags(usual | {"length_ratio": 0.2}) == ["length_ratio"]


def test_nbest_disagreement_is_one_minus_the_mean_chrf_of_the_others():
    from sacrebleu.metrics import CHRF

    from mt.confidence import disagreement

    texts = ["A man rides a bike.", "A man rides a bicycle.", "Two dogs play."]
    chrf = CHRF()
    d = disagreement(texts)
    mine = (chrf.sentence_score(texts[1], [texts[0]]).score
            + chrf.sentence_score(texts[2], [texts[0]]).score) / 200
    assert d[0] == pytest.approx(1 - mine)
    assert d[2] > d[0] and d[2] > d[1]  # the odd one out disagrees most
    assert disagreement(["same", "same"]) == [0.0, 0.0]


def test_a_words_probability_is_its_least_likely_tokens():
    # tokens: "New" "Yo" "rk" "now" <eos>; <eos>'s log-probability belongs to no word
    at, lps = [0, 1, 1, 2], [math.log(0.9), math.log(0.5), math.log(0.25), 0.0, math.log(0.1)]
    assert word_probabilities("New York now", at, lps) == [["New", 0.9], ["York", 0.25],
                                                           ["now", 1.0]]
    assert word_probabilities("", [], [math.log(0.1)]) == []
