"""mt/buckets.py: batches of a few fixed shapes, the same pairs as exact-length batches."""

import numpy as np
import pytest
import torch
from test_decoding_rules import small_model

from mt.buckets import LADDER, bucket, plan_bucketed, rows_for, widen
from mt.data import ParallelData, plan_batches
from mt.loss import label_smoothed_loss
from mt.vocab import PAD


def lengths(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sentence lengths shaped like Multi30k's (mean about 13, a long tail), targets near their
    sources."""
    rng = np.random.default_rng(seed)
    src = np.clip(rng.lognormal(2.45, 0.4, n).astype(np.int64), 1, 80)
    tgt = np.clip((src * rng.uniform(0.7, 1.4, n)).astype(np.int64), 1, 80)
    return src, tgt


def test_the_ladder_pads_little():
    n = np.arange(1, 3000)
    size = bucket(n)
    assert (size >= n).all() and (size < 1.25 * n + 2).all()
    assert set(size.tolist()) <= set(LADDER.tolist())
    assert bucket(np.array([1, 2, 3, 16, 17, 33])).tolist() == [2, 2, 4, 16, 20, 40]


@pytest.mark.parametrize("max_tokens", [500, 6000])
def test_bucketed_batches_hold_the_same_pairs_as_exact_ones(max_tokens):
    src, tgt = lengths(5000)
    for seed in (1, 2):
        new, old = plan_bucketed(src, tgt, max_tokens, seed), plan_batches(src, tgt, max_tokens,
                                                                            seed)
        assert sorted(new.pairs.tolist()) == sorted(old.pairs.tolist()) == list(range(5000))
        for k in range(len(new)):
            pairs = new[k]
            s, t = int(bucket(src[pairs].max())), int(bucket(tgt[pairs].max() + 1))
            assert len(pairs) <= rows_for(s, t, max_tokens)  # within the budget, padded
            assert len(pairs) * (s + t) <= max_tokens or len(pairs) == 1
        assert abs(len(new) - len(old)) <= 0.1 * len(old)  # about as many batches
    assert np.array_equal(plan_bucketed(src, tgt, 6000, 1).pairs,
                          plan_bucketed(src, tgt, 6000, 1).pairs)  # a pure function
    assert not np.array_equal(plan_bucketed(src, tgt, 6000, 1).pairs,
                              plan_bucketed(src, tgt, 6000, 2).pairs)


def shapes(plan, src, tgt) -> set[tuple[int, int, int]]:
    return {(len(p), int(bucket(src[p].max())), int(bucket(tgt[p].max() + 1)))
            for p in (plan[k] for k in range(len(plan)))}


def test_an_epoch_has_at_most_two_shapes_a_bucket_and_the_same_every_epoch():
    src, tgt = lengths(20000)
    buckets = len(set(zip(bucket(src).tolist(), bucket(tgt + 1).tolist(), strict=True)))
    epochs = [shapes(plan_bucketed(src, tgt, 6000, seed), src, tgt) for seed in range(1, 4)]
    assert len(epochs[0]) <= 2 * buckets
    assert epochs[0] == epochs[1] == epochs[2]
    exact = set().union(*(shapes(plan_batches(src, tgt, 6000, s), src, tgt) for s in range(1, 4)))
    assert len(exact) > 2 * len(epochs[0])  # what the ladder alone would leave


def padding(plan, src, tgt, laddered: bool) -> float:
    real = padded = 0
    for k in range(len(plan)):
        p = plan[k]
        s, t = src[p].max(), tgt[p].max() + 1
        if laddered:
            s, t = bucket(s), bucket(t)
        real += int(src[p].sum() + tgt[p].sum()) + len(p)
        padded += len(p) * int(s + t)
    return 1 - real / padded


def test_padding_stays_low():
    src, tgt = lengths(20000)
    new = padding(plan_bucketed(src, tgt, 6000, 1), src, tgt, True)
    old = padding(plan_batches(src, tgt, 6000, 1), src, tgt, False)
    assert new < 0.12 and new < old + 0.03, (new, old)


def test_widened_batches_give_the_same_loss_and_gradients():
    g = torch.Generator().manual_seed(0)
    src = [torch.randint(4, 40, (int(n),), generator=g).tolist() for n in (3, 7, 5)]
    tgt = [torch.randint(4, 40, (int(n),), generator=g).tolist() for n in (4, 9, 6)]
    batch = ParallelData.from_lists(src, tgt).collate(np.arange(3))
    wide = widen(batch)
    assert wide.src.shape == (3, 8) and wide.tgt_in.shape == (3, 10)
    assert torch.equal(wide.src[:, :7], batch.src) and (wide.src[:, 7:] == PAD).all()
    model = small_model(40, 4)
    model.eval()
    results = []
    for b in (batch, wide):
        model.zero_grad()
        loss, _ = label_smoothed_loss(model(b.src, b.tgt_in, project=False),
                                      model.generator.weight, b.tgt_out, 0.1)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (loss0, grads0), (loss1, grads1) = results
    torch.testing.assert_close(loss0, loss1)
    for a, b in zip(grads0, grads1, strict=True):
        torch.testing.assert_close(a, b)
