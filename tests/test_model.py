"""mt/model.py: padding, causality, the decoder cache, attention weights, dropout rates, tied
embeddings, greedy decoding against the model step by step."""

import pytest
import torch
import torch.nn.functional as F
from test_decoding_rules import greedy

from mt.checkpoint import load_run
from mt.config import DecodeConfig, ModelConfig
from mt.kernels import attention
from mt.model import MultiHeadAttention, make_model
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


def test_greedy_matches_stepwise_argmax_and_respects_max_len():
    model = small_model()
    src = random_ids(4, 6)
    src[1, 3:] = PAD
    hyps = greedy(model, src, DecodeConfig(max_len_a=0.0, max_len_b=5))
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


def test_cross_attention_weights_leave_the_outputs_unchanged(tiny_run):
    """The weights come from the hand-written attention path: it must compute what the fused
    kernel computes, and the weights must be distributions over the real source tokens."""
    run = load_run(tiny_run)
    model = run.model
    src = torch.tensor([[5, 6, 7, 8], [9, 10, PAD, PAD]])
    tgt_in = torch.tensor([[BOS, 4, 5], [BOS, 6, 7]])
    weights = model.cross_attention(src, tgt_in)
    assert len(weights) == model.cfg.n_dec_layers
    H = model.cfg.n_heads
    for w in weights:
        assert w.shape == (2, H, 3, 4)
        assert torch.allclose(w.sum(-1), torch.ones(2, H, 3), atol=1e-5)
        assert torch.all(w[1, :, :, 2:] == 0)  # padding gets no attention
    layer = model.decoder[0]
    with torch.no_grad():  # as in cross_attention: without gradients the encoder's kernels differ
        src_mask = model.src_mask(src)
        cache = model.start_cache(model.encode(src, src_mask), src_mask)
        x = model._embed(model.tgt_embed, tgt_in, 0)
        fused = layer(x, None, cache.cross[0], src_mask, None, True)
        by_hand = layer(x, None, cache.cross[0], src_mask, None, True, need_weights=True)
    assert fused[2] is None
    assert torch.allclose(fused[0], by_hand[0], atol=1e-5)
    assert torch.equal(by_hand[2], weights[0])


def test_cross_attention_of_a_single_target_position():
    model = make_model(ModelConfig(d_model=16, n_heads=2, n_enc_layers=1, n_dec_layers=1,
                                   d_ff=32, dropout=0.0), 10, 12).eval()
    w = model.cross_attention(torch.tensor([[4, 5, 6]]), torch.tensor([[BOS]]))
    assert w[0].shape == (1, 2, 1, 3)


@pytest.mark.parametrize("activation, fn", [("gelu", torch.nn.functional.gelu),
                                            ("silu", torch.nn.functional.silu)])
def test_the_feed_forward_activation_is_a_model_option(activation, fn, tmp_path):
    """model.activation: the same parameter names as ReLU's (a checkpoint's layout), the
    activation's values, gradients in training, and the setting saved with the config."""
    from mt.config import Config, load_config

    torch.manual_seed(0)
    relu, other = small_model(), small_model(activation=activation)
    other.load_state_dict(relu.state_dict())  # the same names and shapes
    ff, x = other.encoder[0].ff, torch.randn(2, 3, 32)
    first, _, _, last = ff.net
    assert torch.allclose(ff(x), last(fn(first(x))))
    assert not torch.allclose(ff(x), relu.encoder[0].ff(x))
    src = random_ids(2, 5)
    other.train()(src, src).sum().backward()
    assert first.weight.grad is not None and first.weight.grad.abs().sum() > 0
    cfg = Config()
    cfg.model.activation = activation
    cfg.save(tmp_path / "config.yaml")
    assert load_config(tmp_path / "config.yaml").model.activation == activation


def test_an_unknown_activation_is_a_config_error():
    from mt.config import load_config
    from mt.errors import ConfigError

    assert load_config(None).model.activation == "relu"  # old configs, without the key
    with pytest.raises(ConfigError, match="model.activation"):
        load_config(None, ["model.activation=tanh"])
