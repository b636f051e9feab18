"""The model's layers: the residual's two halves, and the cross-attention weights that `decode`
returns when asked (incremental == teacher-forced, grouped rows == their own copies), in both
pre-norm and post-norm stacks."""

from __future__ import annotations

import pytest
import torch

from mt.config import ModelConfig
from mt.model import Residual, make_model
from mt.vocab import BOS, PAD

V = 16


def small_model(pre_norm: bool):
    torch.manual_seed(3)
    cfg = ModelConfig(d_model=32, n_heads=4, n_enc_layers=2, n_dec_layers=2, d_ff=64,
                      dropout=0.0, pre_norm=pre_norm, max_positions=64)
    return make_model(cfg, V, V).eval()


def source_and_target(B: int = 3, S: int = 7, T: int = 6):
    g = torch.Generator().manual_seed(8)
    src, tgt = torch.randint(4, V, (B, S), generator=g), torch.randint(4, V, (B, T), generator=g)
    src[1, 4:] = PAD
    tgt[:, 0] = BOS
    return src, tgt


@pytest.mark.parametrize("pre_norm", [True, False])
def test_residual_halves_are_pre_norm_or_post_norm(pre_norm):
    res = Residual(8, 0.0, pre_norm)
    x, f = torch.randn(2, 3, 8), torch.nn.Linear(8, 8)
    want = x + f(res.norm(x)) if pre_norm else res.norm(x + f(x))
    assert torch.equal(res(x, f), want)
    assert torch.equal(res.post(x, f(res.pre(x))), want)


@pytest.mark.parametrize("pre_norm", [True, False])
@torch.no_grad()
def test_weights_leave_the_states_unchanged_and_match_cross_attention(pre_norm):
    model, (src, tgt) = small_model(pre_norm), source_and_target()
    mask = model.src_mask(src)
    memory = model.encode(src, mask)
    plain, _ = model.decode(tgt, model.start_cache(memory, mask))
    states, _, weights = model.decode(tgt, model.start_cache(memory, mask), need_weights=True)
    torch.testing.assert_close(states, plain, atol=1e-5, rtol=1e-4)
    assert len(weights) == model.cfg.n_dec_layers
    for w, ref in zip(weights, model.cross_attention(src, tgt), strict=True):
        assert w.shape == (3, model.cfg.n_heads, 6, 7)
        assert torch.equal(w, ref)
        torch.testing.assert_close(w.sum(-1), torch.ones(3, model.cfg.n_heads, 6))
        assert (w[1, :, :, 4:] == 0).all()  # padding gets no attention


@pytest.mark.parametrize("pre_norm", [True, False])
@torch.no_grad()
def test_cached_weights_equal_teacher_forced_weights(pre_norm):
    model, (src, tgt) = small_model(pre_norm), source_and_target()
    full = model.cross_attention(src, tgt)
    mask = model.src_mask(src)
    cache, steps = model.start_cache(model.encode(src, mask), mask), []
    for t in range(tgt.size(1)):
        _, cache, w = model.decode(tgt[:, t:t + 1], cache, need_weights=True)
        steps.append(w)
    for layer, ref in enumerate(full):
        got = torch.cat([w[layer] for w in steps], dim=2)  # (B, H, T, S)
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("pre_norm", [True, False])
@torch.no_grad()
def test_grouped_rows_give_the_states_and_weights_of_their_own_copies(pre_norm):
    """Rows sharing one sentence's encoder keys/values (group > 1, as in beam search) attend
    as if each had its own copy."""
    model, (src, tgt) = small_model(pre_norm), source_and_target()
    mask = model.src_mask(src)
    memory = model.encode(src, mask)
    index = torch.tensor([0, 0, 1, 1, 2, 2])
    _, shared = model.decode(tgt[:, :2], model.start_cache(memory, mask))
    shared = shared.reorder(index, group=2)
    copies = model.start_cache(memory[index], mask[index])
    _, copies = model.decode(tgt[index, :2], copies)
    a, _, wa = model.decode(tgt[index, 2:], shared, need_weights=True)
    b, _, wb = model.decode(tgt[index, 2:], copies, need_weights=True)
    assert shared.cross[0][0].size(0) == 3  # one copy per sentence
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    for x, y in zip(wa, wb, strict=True):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-4)
