import math

import pytest
import torch
import torch.nn.functional as F

from mt.config import ModelConfig
from mt.decode import greedy
from mt.kernels import attention, dropout
from mt.loss import label_smoothed_loss
from mt.model import MultiHeadAttention, make_model
from mt.train.schedule import lr_at
from mt.vocab import BOS, PAD

V = 20


def small_model(pre_norm=True, **kw):
    kw = {"dropout": 0.0, **kw}
    cfg = ModelConfig(d_model=32, n_heads=4, n_enc_layers=2, n_dec_layers=2, d_ff=64,
                      pre_norm=pre_norm, max_positions=64, **kw)
    return make_model(cfg, V, V).eval()


def random_ids(B, L):
    return torch.randint(4, V, (B, L))


@pytest.mark.parametrize("pre_norm", [True, False])
def test_padding_does_not_change_outputs(pre_norm):
    model = small_model(pre_norm)
    src, tgt = random_ids(1, 7), random_ids(1, 5)
    tgt[:, 0] = BOS
    padded_src = torch.cat([src, torch.full((1, 4), PAD)], 1)
    padded_tgt = torch.cat([tgt, torch.full((1, 3), PAD)], 1)
    ref = model(src, tgt)
    out = model(padded_src, padded_tgt)[:, :5]
    assert torch.allclose(ref, out, atol=1e-5)


def test_decoder_is_causal():
    model = small_model()
    src, tgt = random_ids(2, 6), random_ids(2, 8)
    changed = tgt.clone()
    changed[:, 5:] = random_ids(2, 3)
    a, b = model(src, tgt), model(src, changed)
    assert torch.allclose(a[:, :5], b[:, :5], atol=1e-5)  # the past never sees the future
    assert not torch.allclose(a[:, 5:], b[:, 5:], atol=1e-3)


@pytest.mark.parametrize("pre_norm", [True, False])
def test_cached_decoding_equals_full_redecoding(pre_norm):
    model = small_model(pre_norm)
    src = random_ids(3, 9)
    src[0, 6:] = PAD
    tgt = random_ids(3, 7)
    tgt[:, 0] = BOS
    mask = model.src_mask(src)
    memory = model.encode(src, mask)
    full, _ = model.decode(tgt, model.start_cache(memory, mask))
    cache, steps = model.start_cache(memory, mask), []
    for t in range(tgt.size(1)):
        states, cache = model.decode(tgt[:, t:t + 1], cache)
        steps.append(states)
    assert torch.allclose(full, torch.cat(steps, 1), atol=1e-5)
    # A multi-token chunk after a cached prefix needs the offset causal mask.
    cache = model.start_cache(memory, mask)
    first, cache = model.decode(tgt[:, :3], cache)
    rest, _ = model.decode(tgt[:, 3:], cache)
    assert torch.allclose(full, torch.cat([first, rest], 1), atol=1e-5)


def test_attention_weights_only_when_asked_and_consistent():
    mha = MultiHeadAttention(16, 2, 0.0)
    x = torch.randn(2, 5, 16)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)[:, None, None, :]
    out, w = mha(x, mha.project_kv(x), mask)
    assert w is None
    out2, w2 = mha(x, mha.project_kv(x), mask, need_weights=True)
    assert torch.allclose(out, out2, atol=1e-6)
    assert torch.allclose(w2.sum(-1), torch.ones(2, 2, 5))
    assert (w2[0, :, :, 3:] == 0).all()  # padded keys get no weight
    q, k, v = torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8)
    causal, cw = attention(q, k, v, None, is_causal=True, need_weights=True)
    assert torch.allclose(causal, attention(q, k, v, None, is_causal=True)[0], atol=1e-6)
    assert (cw[0, 0].triu(1) == 0).all()


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


@pytest.mark.parametrize("rates, random", [
    (dict(), False),  # all 0: training-mode forwards agree
    (dict(attention_dropout=0.5), True),
    (dict(activation_dropout=0.5), True),
    (dict(dropout=0.5, attention_dropout=0.0, activation_dropout=0.0), True),  # residuals
])
def test_each_dropout_rate_acts_alone(rates, random):
    model = small_model(**rates).train()
    src, tgt = random_ids(2, 7), random_ids(2, 5)
    a, b = model(src, tgt), model(src, tgt)
    assert torch.equal(a, b) != random


def test_sublayer_dropout_rates_default_to_dropout():
    model = small_model(dropout=0.3)
    layer = model.decoder[0]
    assert layer.self_attn.dropout == layer.cross_attn.dropout == layer.ff.net[2].p == 0.3
    model = small_model(dropout=0.3, attention_dropout=0.0, activation_dropout=0.1)
    assert model.encoder[0].attn.dropout == model.decoder[0].cross_attn.dropout == 0.0
    assert model.encoder[0].ff.net[2].p == model.decoder[0].ff.net[2].p == 0.1
    assert model.encoder[0].res1.drop.p == model.drop.p == 0.3


def test_tied_weights():
    m = small_model()
    assert m.generator.weight.data_ptr() == m.tgt_embed.weight.data_ptr()
    assert m.src_embed.weight.data_ptr() != m.tgt_embed.weight.data_ptr()
    shared = small_model(tie_all=True)
    assert shared.src_embed is shared.tgt_embed
    untied = small_model(tie_output=False)
    assert untied.generator.weight.data_ptr() != untied.tgt_embed.weight.data_ptr()


def test_label_smoothed_loss_matches_hand_computation():
    torch.manual_seed(1)
    logits = torch.randn(2, 3, 5)
    target = torch.tensor([[2, 4, PAD], [1, 3, 3]])
    eps = 0.1
    loss, nll = label_smoothed_loss(logits, target, eps)
    want_loss, want_nll = 0.0, 0.0
    for b in range(2):
        for t in range(3):
            y = target[b, t].item()
            if y == PAD:
                continue
            logp = [logits[b, t, c].item() - math.log(sum(math.exp(logits[b, t, j].item())
                                                          for j in range(5))) for c in range(5)]
            # (1 - eps) on the target, eps spread evenly over all 5 classes.
            want_loss += -sum(((1 - eps) * (c == y) + eps / 5) * logp[c] for c in range(5))
            want_nll += -logp[y]
    assert loss.item() == pytest.approx(want_loss, rel=1e-5)
    assert nll.item() == pytest.approx(want_nll, rel=1e-5)
    assert label_smoothed_loss(logits, target, 0.0)[0].item() == pytest.approx(want_nll, rel=1e-5)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothed_loss_gradient_matches_autograd(eps):
    """The hand-written backward against autograd through log-softmax (float64), pad rows
    included, with an upstream gradient other than 1; and it flows from bf16 logits."""
    torch.manual_seed(2)
    logits = torch.randn(3, 4, 7, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([[2, 4, PAD, 6], [1, 3, 3, PAD], [5, 5, 0, 2]])
    loss, nll = label_smoothed_loss(logits, target, eps)
    (2.5 * loss).backward()
    ref = logits.detach().clone().requires_grad_(True)
    lp = ref.log_softmax(-1).view(-1, 7)
    keep = target.view(-1) != PAD
    want = (((1 - eps) * -lp.gather(1, target.view(-1, 1)).squeeze(1) - eps * lp.mean(-1))
            [keep].sum())
    (2.5 * want).backward()
    assert loss.item() == pytest.approx(want.item(), rel=1e-12)
    assert nll.item() == pytest.approx(-lp.gather(1, target.view(-1, 1)).squeeze(1)[keep]
                                       .sum().item(), rel=1e-12)
    torch.testing.assert_close(logits.grad, ref.grad, rtol=1e-10, atol=1e-12)
    assert not nll.requires_grad
    half = logits.detach().bfloat16().requires_grad_(True)
    label_smoothed_loss(half, target, eps)[0].backward()
    assert half.grad.dtype == torch.bfloat16 and torch.isfinite(half.grad).all()


def test_lr_warmup_then_inverse_sqrt():
    assert lr_at(50, 1.0, 100) == pytest.approx(0.5)
    assert lr_at(100, 1.0, 100) == pytest.approx(1.0)
    assert lr_at(400, 1.0, 100) == pytest.approx(0.5)
    assert lr_at(7, 1.0, 0) == 1.0


@pytest.mark.parametrize("schedule", ["cosine", "linear"])
def test_lr_decays_to_zero_at_max_steps(schedule):
    assert lr_at(50, 1.0, 100, schedule, 1100) == pytest.approx(0.5)  # the same warmup
    assert lr_at(100, 1.0, 100, schedule, 1100) == pytest.approx(1.0)
    assert lr_at(600, 1.0, 100, schedule, 1100) == pytest.approx(0.5)  # half the decay
    assert lr_at(1100, 1.0, 100, schedule, 1100) == pytest.approx(0.0, abs=1e-12)
    assert lr_at(2000, 1.0, 100, schedule, 1100) == pytest.approx(0.0, abs=1e-12)
    curve = [lr_at(s, 1.0, 100, schedule, 1100) for s in range(100, 1101, 50)]
    assert all(a > b for a, b in zip(curve, curve[1:]))
    # a time budget spent sooner ends the decay sooner; one spent later changes nothing
    assert lr_at(600, 1.0, 100, schedule, 1100, time_done=1.0) == pytest.approx(0.0, abs=1e-12)
    assert lr_at(600, 1.0, 100, schedule, 0, time_done=0.5) == pytest.approx(0.5)
    assert lr_at(600, 1.0, 100, schedule, 1100, time_done=0.2) == pytest.approx(0.5)
    # cosine stays above the line in the first half of the decay, below it in the second
    if schedule == "cosine":
        assert lr_at(350, 1.0, 100, "cosine", 1100) > lr_at(350, 1.0, 100, "linear", 1100)
        assert lr_at(850, 1.0, 100, "cosine", 1100) < lr_at(850, 1.0, 100, "linear", 1100)


def test_greedy_matches_stepwise_argmax_and_respects_max_len():
    model = small_model()
    src = random_ids(4, 6)
    src[1, 3:] = PAD
    hyps = greedy(model, src, max_len_a=0.0, max_len_b=5)
    for i, hyp in enumerate(hyps):
        assert len(hyp) <= 5
        # Re-derive sentence i alone, re-decoding the whole prefix each step.
        s = src[i:i + 1, : int((src[i] != PAD).sum())]
        prefix = [BOS]
        for _ in range(5):
            logits = model(s, torch.tensor([prefix]))
            nxt = int(F.log_softmax(logits[0, -1], -1).argmax())
            if nxt == 3:
                break
            prefix.append(nxt)
        assert hyp == prefix[1:]
