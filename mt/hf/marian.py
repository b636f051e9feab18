"""Marian models in the Hugging Face layout (`MarianMTModel`) and mt's, both ways: the config
(`model_config`, `hf_config`) and the weights (`to_mt`, `to_hf`), with nothing of transformers.

A Marian model is a post-norm Transformer without final layer norms (model.pre_norm: false),
with sinusoids in Marian's layout (model.positions: marian), a fixed logits bias
(model.logits_bias), a decoder that starts from <pad> (model.decoder_start: pad) and, mostly,
one vocabulary shared by both embeddings and the output (model.tie_all). Its vocabulary is
mt's in another order (mt.tokenizers.marian.mt_order): the embedding, output and bias rows are
permuted between the two.

Every config value mt cannot represent is a CheckpointError naming its key, never a model that
computes something else.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

import torch

from mt.config import INT_MAX, ModelConfig
from mt.errors import CheckpointError
from mt.model import PositionalEncoding

# config.json's activation_function -> model.activation, and back (transformers' ACT2FN:
# swish and silu are one function, gelu the erf form as torch's)
ACTIVATIONS = {"swish": "silu", "silu": "silu", "gelu": "gelu", "relu": "relu"}
HF_ACTIVATIONS = {"silu": "swish", "gelu": "gelu", "relu": "relu"}

# keys of older Marian/BART configs that change the architecture: the value mt computes
REQUIRED = {
    "normalize_before": (False, "pre-norm layers"),
    "add_final_layer_norm": (False, "a final layer norm"),
    "normalize_embedding": (False, "a layer norm on the embeddings"),
    "static_position_embeddings": (True, "learned positions"),
    "add_bias_logits": (False, "a trained logits bias"),
    "encoder_layerdrop": (0.0, "layer drop"),
    "decoder_layerdrop": (0.0, "layer drop"),
}
# MarianConfig's defaults for keys a config.json may leave out
DEFAULTS = {"activation_function": "gelu", "dropout": 0.1, "attention_dropout": 0.0,
            "activation_dropout": 0.0, "scale_embedding": False,
            "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True,
            "max_position_embeddings": 1024}
NEEDED = ("d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
          "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "vocab_size",
          "pad_token_id", "eos_token_id")
# What each value read must be, checked before any arithmetic: the least integer (sizes are
# positive, ids not negative; positions hold <bos>, <eos> and a token), a rate, a flag
LEAST = {**{key: 1 for key in NEEDED}, "pad_token_id": 0, "eos_token_id": 0,
         "max_position_embeddings": 3}
# The most: mt's model builds a table of that many positions, whatever the weights hold
MOST = {"max_position_embeddings": 65536}
RATES = ("dropout", "attention_dropout", "activation_dropout")
FLAGS = ("scale_embedding", "share_encoder_decoder_embeddings", "tie_word_embeddings")


def model_config(hf: Mapping, where: str) -> ModelConfig:
    """model section for a config.json of a MarianMTModel."""
    def fail(key: str, problem: str) -> CheckpointError:
        return CheckpointError(f"{where}: {key}: {problem}; mt cannot import this model")

    if hf.get("model_type") != "marian":
        raise fail("model_type", f"{hf.get('model_type')!r}, not 'marian' (mt imports "
                                 "MarianMTModel, as OPUS-MT publishes)")
    for key in NEEDED:
        if key not in hf:
            raise fail(key, "missing")
    for key, (value, meaning) in REQUIRED.items():
        if key in hf and hf[key] != value:
            raise fail(key, f"{hf[key]!r} means {meaning}, which mt lacks (it needs {value!r})")
    c = {**DEFAULTS, **hf}
    for key in (*LEAST, *RATES, *FLAGS, "activation_function"):
        if problem := _value_problem(key, c[key]):
            raise fail(key, problem)
    for a, b in (("encoder_attention_heads", "decoder_attention_heads"),
                 ("encoder_ffn_dim", "decoder_ffn_dim")):
        if c[a] != c[b]:
            raise fail(b, f"{c[b]} differs from {a} {c[a]} (mt has one value for both)")
    start = c.get("decoder_start_token_id", c["pad_token_id"])
    if start != c["pad_token_id"]:
        raise fail("decoder_start_token_id", f"{start} is not pad_token_id "
                                             f"{c['pad_token_id']} (mt's decoder starts from "
                                             "<bos> or <pad>)")
    shared = bool(c["share_encoder_decoder_embeddings"])
    tied = bool(c["tie_word_embeddings"])
    if shared and not tied:
        raise fail("tie_word_embeddings", "false with shared embeddings (mt ties the output "
                                          "to embeddings it shares)")
    if c["d_model"] % c["encoder_attention_heads"]:
        raise fail("d_model", "not divisible by encoder_attention_heads")
    return ModelConfig(
        d_model=c["d_model"], n_heads=c["encoder_attention_heads"],
        n_enc_layers=c["encoder_layers"], n_dec_layers=c["decoder_layers"],
        d_ff=c["encoder_ffn_dim"], dropout=float(c["dropout"]),
        attention_dropout=float(c["attention_dropout"]),
        activation_dropout=float(c["activation_dropout"]),
        activation=ACTIVATIONS[c["activation_function"]], pre_norm=False, tie_output=tied,
        tie_all=shared, max_positions=c["max_position_embeddings"], positions="marian",
        scale_embedding=bool(c["scale_embedding"]), logits_bias=True, decoder_start="pad")


def _value_problem(key: str, value: object) -> str | None:
    """What is wrong with config.json's value of key (a LEAST, RATES or FLAGS key, or the
    activation), or None."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    shown = json.dumps(value)  # as config.json has it: null, "high"
    if key in RATES and not (number and 0.0 <= value < 1.0):
        return f"{shown} is not a rate in [0, 1)"
    if key in FLAGS and not isinstance(value, bool):
        return f"{shown} is not true or false"
    most = MOST.get(key, INT_MAX)
    if key in LEAST and not (number and isinstance(value, int) and LEAST[key] <= value <= most):
        return f"{shown} is not an integer from {LEAST[key]} to {most:,}"
    if key == "activation_function" and not (isinstance(value, str) and value in ACTIVATIONS):
        return f"{shown} is not one of mt's ({', '.join(ACTIVATIONS)})"
    return None


def exportable(m: ModelConfig) -> Iterator[str]:
    """What stands in the way of expressing model section m as a MarianMTModel."""
    wanted = {"pre_norm": False, "positions": "marian", "decoder_start": "pad"}
    for key, value in wanted.items():
        if getattr(m, key) != value:
            yield f"model.{key} is {getattr(m, key)!r} (Marian has {value!r})"


def hf_config(m: ModelConfig, src_size: int, tgt_size: int, pad: int, eos: int) -> dict:
    """config.json for model section m (exportable), with Marian's ids of <pad> and </s>."""
    return {
        "architectures": ["MarianMTModel"], "model_type": "marian", "is_encoder_decoder": True,
        "vocab_size": src_size, "decoder_vocab_size": tgt_size, "d_model": m.d_model,
        "encoder_layers": m.n_enc_layers, "decoder_layers": m.n_dec_layers,
        "encoder_attention_heads": m.n_heads, "decoder_attention_heads": m.n_heads,
        "encoder_ffn_dim": m.d_ff, "decoder_ffn_dim": m.d_ff,
        "activation_function": HF_ACTIVATIONS[m.activation], "dropout": m.dropout,
        "attention_dropout": m.dropout if m.attention_dropout is None else m.attention_dropout,
        "activation_dropout": (m.dropout if m.activation_dropout is None
                               else m.activation_dropout),
        "max_position_embeddings": m.max_positions, "scale_embedding": m.scale_embedding,
        "share_encoder_decoder_embeddings": m.tie_all,
        "tie_word_embeddings": m.tie_output or m.tie_all,
        "pad_token_id": pad, "eos_token_id": eos, "decoder_start_token_id": pad,
        "forced_eos_token_id": eos, "bos_token_id": None,
    }


def _layer_names(m: ModelConfig) -> Iterator[tuple[str, str]]:
    """(mt name, Hugging Face name) of every layer weight copied as it is; each attention's
    keys and values are one kv_proj in mt, k_proj and v_proj there (_KV)."""
    attn = ("q_proj", "out_proj")
    for i in range(m.n_enc_layers):
        mt, hf = f"encoder.{i}.", f"model.encoder.layers.{i}."
        parts = [(f"attn.{p}", f"self_attn.{p}") for p in attn] + [
            ("res1.norm", "self_attn_layer_norm"), ("ff.net.0", "fc1"), ("ff.net.3", "fc2"),
            ("res2.norm", "final_layer_norm")]
        for a, b in parts:
            for kind in ("weight", "bias"):
                yield f"{mt}{a}.{kind}", f"{hf}{b}.{kind}"
    for i in range(m.n_dec_layers):
        mt, hf = f"decoder.{i}.", f"model.decoder.layers.{i}."
        parts = [(f"self_attn.{p}", f"self_attn.{p}") for p in attn] + [
            (f"cross_attn.{p}", f"encoder_attn.{p}") for p in attn] + [
            ("res.0.norm", "self_attn_layer_norm"), ("res.1.norm", "encoder_attn_layer_norm"),
            ("ff.net.0", "fc1"), ("ff.net.3", "fc2"), ("res.2.norm", "final_layer_norm")]
        for a, b in parts:
            for kind in ("weight", "bias"):
                yield f"{mt}{a}.{kind}", f"{hf}{b}.{kind}"


def _kv_names(m: ModelConfig) -> Iterator[tuple[str, str]]:
    """(mt's kv_proj prefix, the Hugging Face attention's prefix) of every attention."""
    for i in range(m.n_enc_layers):
        yield f"encoder.{i}.attn.kv_proj", f"model.encoder.layers.{i}.self_attn"
    for i in range(m.n_dec_layers):
        yield f"decoder.{i}.self_attn.kv_proj", f"model.decoder.layers.{i}.self_attn"
        yield f"decoder.{i}.cross_attn.kv_proj", f"model.decoder.layers.{i}.encoder_attn"


# the encoder's, the decoder's, the output's; and the one of shared embeddings
EMBEDDING_NAMES = ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                   "lm_head.weight")
SHARED = "model.shared.weight"
POSITIONS = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")
BIAS = "final_logits_bias"


class Weights:
    """A Hugging Face state dict read once, tensor by tensor (`take` hands each over and
    forgets it), so a conversion holds little more than its result."""

    def __init__(self, get, names: list[str], where: str):
        self._get, self.left, self.where = get, set(names), where

    def take(self, name: str) -> torch.Tensor:
        if name not in self.left:
            raise CheckpointError(f"{self.where}: weight {name} missing; the file is not a "
                                  "whole MarianMTModel")
        self.left.discard(name)
        return self._get(name).float()

    def first(self, *names: str) -> torch.Tensor | None:
        """The first of names the file holds (the others, tied copies, read and dropped)."""
        found = [n for n in names if n in self.left]
        if not found:
            return None
        tensors = [self.take(n) for n in found]
        if any(not torch.equal(t, tensors[0]) for t in tensors[1:]):
            raise CheckpointError(f"{self.where}: {found[0]} and {found[1]} differ, though the "
                                  "config ties them; mt cannot import this model")
        return tensors[0]


def to_mt(w: Weights, m: ModelConfig, src_order: torch.Tensor, tgt_order: torch.Tensor
          ) -> dict[str, torch.Tensor]:
    """mt's state dict for model section m (model_config's) from the Hugging Face weights;
    src_order/tgt_order (V,): the Marian id of each mt id (mt_order)."""
    out: dict[str, torch.Tensor] = {}
    for a, b in _layer_names(m):
        out[a] = w.take(b)
    for a, b in _kv_names(m):
        for kind in ("weight", "bias"):
            out[f"{a}.{kind}"] = torch.cat([w.take(f"{b}.k_proj.{kind}"),
                                            w.take(f"{b}.v_proj.{kind}")])
    enc, dec, lm = EMBEDDING_NAMES
    tied = (lm,) if m.tie_output or m.tie_all else ()
    if m.tie_all:  # one matrix, under any of the names that tie it
        src = tgt = out_w = w.first(SHARED, enc, dec, *tied)
    else:
        src = w.first(enc)
        tgt = w.first(dec, *tied)
        out_w = tgt if tied else w.first(lm)
    for name, t in (("source embedding", src), ("target embedding", tgt), ("output", out_w)):
        if t is None:
            raise CheckpointError(f"{w.where}: no {name} weights; the file is not a whole "
                                  "MarianMTModel")
    out["tgt_embed.weight"] = tgt[tgt_order]  # tied names share one tensor, as in mt's model
    out["src_embed.weight"] = out["tgt_embed.weight"] if m.tie_all else src[src_order]
    out["generator.weight"] = out["tgt_embed.weight"] if tied else out_w[tgt_order]
    bias = w.first(BIAS)
    out["logits_bias"] = (torch.zeros(len(tgt_order)) if bias is None
                          else bias.reshape(-1)[tgt_order])
    for name in POSITIONS:
        if (stored := w.first(name)) is None:
            continue
        if stored.dim() != 2 or stored.shape[1] != m.d_model:  # before a table of that width
            raise CheckpointError(f"{w.where}: {name} is {tuple(stored.shape)}, config.json's "
                                  f"d_model is {m.d_model}; the weights do not fit config.json")
        n = min(m.max_positions, len(stored))
        if not torch.allclose(stored[:n], PositionalEncoding(m.d_model, n, "marian").table,
                              atol=1e-5):
            raise CheckpointError(f"{w.where}: {name} are not Marian's sinusoids (learned "
                                  "positions?); mt cannot import this model")
    if w.left:
        raise CheckpointError(f"{w.where}: weight {sorted(w.left)[0]} is not part of a "
                              "MarianMTModel mt can represent; mt cannot import this model")
    return out


def to_hf(state: Mapping[str, torch.Tensor], m: ModelConfig, src_order: torch.Tensor,
          tgt_order: torch.Tensor) -> dict[str, torch.Tensor]:
    """The Hugging Face state dict of an mt model (exportable), every tensor its own (as
    safetensors stores them); src_order/tgt_order as in to_mt."""
    out = {b: state[a].clone() for a, b in _layer_names(m)}
    for a, b in _kv_names(m):
        for kind in ("weight", "bias"):
            k, v = state[f"{a}.{kind}"].chunk(2)
            out[f"{b}.k_proj.{kind}"], out[f"{b}.v_proj.{kind}"] = k.clone(), v.clone()

    def marian(t: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
        back = torch.empty_like(t)
        back[order] = t
        return back

    # as save_pretrained writes them: a tied matrix under one name (SHARED, or the decoder's)
    enc, dec, lm = EMBEDDING_NAMES
    tgt = marian(state["tgt_embed.weight"], tgt_order)
    if m.tie_all:
        out[SHARED] = tgt
    else:
        out[enc] = marian(state["src_embed.weight"], src_order)
        out[dec] = tgt
        if not m.tie_output:
            out[lm] = marian(state["generator.weight"], tgt_order)
    bias = state.get("logits_bias")
    out[BIAS] = (torch.zeros(1, len(tgt_order)) if bias is None
                 else marian(bias, tgt_order)[None])
    return out
