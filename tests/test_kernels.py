"""mt/kernels.py: attention (fused or hand-written, the same results) and the cheap dropout."""

import pytest
import torch
import torch.nn.functional as F

from mt.kernels import _keep_mask, attention, dropout, extend, relu_dropout


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("causal", [True, False])
def test_attention_gives_torch_fused_results_whichever_form_it_picks(dtype, tol, grad, causal):
    # CPU picks the fused or the hand-written form by dtype and gradients (fused_is_faster)
    torch.manual_seed(0)
    q, k, v = (torch.randn(3, 2, 6, 8) for _ in range(3))
    mask = None if causal else torch.rand(3, 1, 1, 6) > 0.3
    if mask is not None:
        mask[..., 0] = True  # no row without a key
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    ins = [t.to(dtype).clone().requires_grad_(grad) for t in (q, k, v)]
    with torch.set_grad_enabled(grad):
        out = attention(*ins, mask, is_causal=causal)[0]
    assert out.dtype == dtype
    assert torch.allclose(out.float(), ref, atol=tol)
    if grad:
        out.float().sum().backward()
        ref_ins = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        F.scaled_dot_product_attention(*ref_ins, attn_mask=mask, is_causal=causal).sum().backward()
        for mine, theirs in zip(ins, ref_ins):
            assert torch.allclose(mine.grad.float(), theirs.grad, atol=5 * tol)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_cheap_dropout_drops_at_its_rate_and_keeps_the_mean(p):
    torch.manual_seed(0)
    x = torch.ones(400, 1000, requires_grad=True)
    y = dropout(x, p)
    dropped = (y == 0).float().mean().item()
    rate = round(p * 256) / 256  # the rate is a multiple of 1/256
    assert abs(dropped - rate) < 0.005
    assert abs(y.mean().item() - 1.0) < 0.01  # kept values scaled by 1 / (1 - rate)
    assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / (1 - rate)))
    y.sum().backward()  # the gradient flows through the kept elements only, scaled alike
    assert torch.equal(x.grad, y.detach())
    torch.manual_seed(0)
    assert torch.equal(dropout(x, p), y)  # the torch seed decides the mask (exact resume)
    assert dropout(x, p, training=False) is x
    masks = [(dropout(torch.ones(8, 8), p) == 0) for _ in range(2)]
    assert not torch.equal(*masks)
    half = dropout(torch.ones(400, 1000, dtype=torch.bfloat16), p)  # bf16 autocast's dtype
    assert half.dtype == torch.bfloat16
    assert abs((half == 0).float().mean().item() - rate) < 0.005
    assert abs(half.float().mean().item() - 1.0) < 0.01


def test_attention_dropout_on_cpu_drops_weights_not_outputs():
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    plain = attention(q, k, v, None)[0]
    assert torch.allclose(attention(q, k, v, None, p=1e-4)[0], plain, atol=1e-6)  # rounds to 0
    out = attention(q, k, v, None, p=0.5)[0]
    assert not torch.allclose(out, plain)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_relu_dropout_is_dropout_of_relu_bit_for_bit_and_saves_one_tensor(dtype):
    """The same outputs and gradients as dropout(relu(x)) for the same random state, bit for
    bit, keeping for backward one tensor the size of x (its output), not three."""
    x0 = torch.randn(64, 300).to(dtype)
    want, want_grad, want_bytes = _trained(lambda x: dropout(torch.relu(x), 0.2), x0, seed=1)
    got, got_grad, got_bytes = _trained(lambda x: relu_dropout(x, 0.2), x0, seed=1)
    assert torch.equal(got, want) and torch.equal(got_grad, want_grad)
    assert 0 < (got == 0).float().mean() - (x0 <= 0).float().mean() < 0.2  # relu, then dropped
    assert got_bytes == x0.numel() * x0.element_size() < want_bytes
    assert torch.equal(relu_dropout(x0, 0.2, training=False), torch.relu(x0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_keeps_a_bool_mask_and_scales_as_a_float_mask_would(dtype):
    """The values and gradients of x * (keep as x's dtype, times the scale), bit for bit
    (float32: the mask mt kept before), keeping one byte per element for backward."""
    x0 = torch.randn(64, 300).to(dtype)
    torch.manual_seed(2)
    keep, scale = _keep_mask(x0, 0.2)
    want, want_grad, _ = _trained(lambda x: x * keep.to(torch.float32).mul_(scale).to(x.dtype)
                                  if dtype == torch.float32 else x * keep * scale, x0, seed=2)
    got, got_grad, got_bytes = _trained(lambda x: dropout(x, 0.2), x0, seed=2)
    assert torch.equal(got, want) and torch.equal(got_grad, want_grad)
    assert got_bytes == x0.numel()  # the bool mask


def _trained(fn, x0, seed):
    """fn(x) from the random state `seed`, with a backward pass: its output, x's gradient and
    the bytes autograd kept for the backward."""
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    torch.manual_seed(seed)
    x = x0.clone().requires_grad_()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = fn(x)
    (y * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
    return y.detach(), x.grad, sum(saved)


@pytest.mark.parametrize("dim", [1, 2])
def test_extend_is_reorder_then_append_in_one_result(dim):
    # the decoder's cache (dim 2) and a search's attention record (dim 1) grow this way
    torch.manual_seed(0)
    past = torch.randn(4, 3, 5, 2)
    new_shape = [6, 3, 5, 2]
    new_shape[dim] = 1
    new = torch.randn(new_shape)
    order = torch.tensor([3, 0, 0, 2, 1, 3])  # rows repeat and move, as beams do
    got = extend(past, order, new, dim)
    assert torch.equal(got, torch.cat([past[order], new], dim=dim))
    assert torch.equal(extend(past, None, new[:4], dim), torch.cat([past, new[:4]], dim=dim))
