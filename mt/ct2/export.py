"""`mt export`: a trained model as a CTranslate2 model directory, through CTranslate2's spec API.

The directory holds CTranslate2's files (model.bin, config.json, the vocabularies) and, beside
them, the run's own config.yaml, vocabularies and tokenizer files, so that mt can tokenize and
detokenize for it (`mt translate --engine ctranslate2 OUT`) and any CTranslate2 user can load it.

What is carried over exactly, and how (CTranslate2's defaults differ in several places):
  positions     mt's own sinusoid table, written into the spec; CTranslate2's built-in table
                orders sines and cosines differently and spaces the frequencies differently
  embeddings    scaled by sqrt(d_model), as mt does
  layer norm    pre- or post-norm, mt's epsilon, the final norms of a pre-norm stack
  attention     self-attention as one fused projection (query, then key, then value rows);
                cross-attention as the query projection and one fused key/value projection
  output        the generator, tied to the target embedding or not (CTranslate2 aliases
                identical weights itself)
  vocabularies  mt's, with its <unk>, <bos> (decoder start), <eos>; no token added to the source
  shortlist     the run's lexical shortlist (mt.shortlist) as CTranslate2's vocabulary map,
                vmap.txt (`translate_batch(..., use_vmap=True)`; `--shortlist` with
                `--engine ctranslate2`): the same table mt's own search uses
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from mt.checkpoint import CONFIG, SRC_VOCAB, STARTERS, TGT_VOCAB, Run
from mt.errors import ConfigError, RunError
from mt.model import MultiHeadAttention, Seq2Seq
from mt.shortlist import Shortlist
from mt.tokenizers import tokenizer_files
from mt.vocab import EOS, UNK, start_id

EXTRA = 'the CTranslate2 engine needs the ctranslate2 package: pip install "mt[ctranslate2]"'
QUANTIZATIONS = ("int8", "int8_float32", "bfloat16", "float16")
MARKER = "mt_export.json"  # written last into an export: what it came from
VMAP = "vmap.txt"  # CTranslate2's vocabulary map: the run's shortlist


def require_ctranslate2():
    """The ctranslate2 module, or a one-line ConfigError naming the extra that installs it."""
    try:
        import ctranslate2
    except ImportError:
        raise ConfigError(EXTRA) from None
    return ctranslate2


def check_quantization(quantization: str | None) -> None:
    """Refuse a quantization CTranslate2 cannot run on this machine (its CPU, or a GPU where
    there is one), naming the ones it can."""
    if quantization is None:
        return
    ct2 = require_ctranslate2()
    devices = ["cpu"] + (["cuda"] if ct2.get_cuda_device_count() > 0 else [])
    supported = set().union(*(ct2.get_supported_compute_types(d) for d in devices))
    if quantization not in supported:
        raise RunError(f"quantization {quantization} cannot run on this machine "
                       f"({' or '.join(devices)}); it can run: {', '.join(sorted(supported))}")


def _np(t: torch.Tensor):
    # A copy: quantizing the spec rewrites its arrays in place, which would change the model.
    return t.detach().to("cpu", torch.float32, copy=True).numpy()


def _linear(spec, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
    spec.weight = _np(weight)
    if bias is not None:
        spec.bias = _np(bias)


def _norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _np(norm.weight), _np(norm.bias)


def _self_attention(spec, attn: MultiHeadAttention) -> None:
    # mt's kv_proj holds the key rows, then the value rows: (2D, D). Fused: q, k, v rows.
    _linear(spec.linear[0], torch.cat([attn.q_proj.weight, attn.kv_proj.weight]),
            torch.cat([attn.q_proj.bias, attn.kv_proj.bias]))
    _linear(spec.linear[1], attn.out_proj.weight, attn.out_proj.bias)


def _cross_attention(spec, attn: MultiHeadAttention) -> None:
    _linear(spec.linear[0], attn.q_proj.weight, attn.q_proj.bias)
    _linear(spec.linear[1], attn.kv_proj.weight, attn.kv_proj.bias)
    _linear(spec.linear[2], attn.out_proj.weight, attn.out_proj.bias)


def _ffn(spec, ff) -> None:
    first, last = ff.net[0], ff.net[-1]  # Linear, ReLU, Dropout, Linear
    _linear(spec.linear_0, first.weight, first.bias)
    _linear(spec.linear_1, last.weight, last.bias)


def _inputs(spec, embedding: torch.nn.Embedding, table: torch.Tensor, scale: bool) -> None:
    spec.scale_embeddings = scale  # multiply by sqrt(d_model) (model.scale_embedding)
    spec.position_encodings.encodings = _np(table)  # (max_positions, D); row i for position i


# model.activation -> CTranslate2's (its GELU is the erf form, as torch's nn.GELU)
CT2_ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "silu": "SWISH"}


def build_spec(model: Seq2Seq, src_tokens: list[str], tgt_tokens: list[str]):
    """A filled, validated `ctranslate2.specs.TransformerSpec` for an mt model.

    Positions come from `model.positions.table`, so a test can perturb that table and see
    the exported model disagree.
    """
    specs = require_ctranslate2().specs
    cfg = model.cfg
    spec = specs.TransformerSpec.from_config(
        (cfg.n_enc_layers, cfg.n_dec_layers), cfg.n_heads, pre_norm=cfg.pre_norm,
        activation=getattr(specs.Activation, CT2_ACTIVATIONS[cfg.activation]))
    enc, dec = spec.encoder, spec.decoder
    table = model.positions.table
    _inputs(enc, model.src_embed, table, cfg.scale_embedding)
    enc.embeddings[0].weight = _np(model.src_embed.weight)
    for layer_spec, layer in zip(enc.layer, model.encoder, strict=True):
        _self_attention(layer_spec.self_attention, layer.attn)
        _norm(layer_spec.self_attention.layer_norm, layer.res1.norm)
        _ffn(layer_spec.ffn, layer.ff)
        _norm(layer_spec.ffn.layer_norm, layer.res2.norm)
    _inputs(dec, model.tgt_embed, table, cfg.scale_embedding)
    dec.embeddings.weight = _np(model.tgt_embed.weight)
    for layer_spec, layer in zip(dec.layer, model.decoder, strict=True):
        _self_attention(layer_spec.self_attention, layer.self_attn)
        _norm(layer_spec.self_attention.layer_norm, layer.res[0].norm)
        _cross_attention(layer_spec.attention, layer.cross_attn)
        _norm(layer_spec.attention.layer_norm, layer.res[1].norm)
        _ffn(layer_spec.ffn, layer.ff)
        _norm(layer_spec.ffn.layer_norm, layer.res[2].norm)
    if cfg.pre_norm:  # a pre-norm stack ends in a LayerNorm; a post-norm one has none
        _norm(enc.layer_norm, model.enc_norm)
        _norm(dec.layer_norm, model.dec_norm)
    _linear(dec.projection, model.generator.weight, model.logits_bias)

    eps = {m.eps for m in model.modules() if isinstance(m, torch.nn.LayerNorm)}
    if len(eps) != 1:
        raise ValueError(f"CTranslate2 takes one layer-norm epsilon; this model has {eps}")
    c = spec.config
    c.layer_norm_epsilon = eps.pop()
    start = tgt_tokens[start_id(cfg.decoder_start)]
    c.unk_token, c.bos_token, c.eos_token = tgt_tokens[UNK], start, tgt_tokens[EOS]
    c.decoder_start_token = start
    c.add_source_bos = c.add_source_eos = False
    spec.register_source_vocabulary(src_tokens)
    spec.register_target_vocabulary(tgt_tokens)
    spec.validate()
    return spec


def write_model(run: Run, dest: Path, quantization: str | None) -> None:
    """Write the export into the (new, empty) directory dest."""
    spec = build_spec(run.model, run.src_vocab.itos, run.tgt_vocab.itos)
    spec.optimize(quantization=quantization)
    spec.save(str(dest))
    # The run's config, vocabularies and tokenizer files as a run directory holds them, so that
    # mt.checkpoint.open_run reads the export as it reads a run.
    run.cfg.save(dest / CONFIG)
    run.src_vocab.save(dest / SRC_VOCAB)
    run.tgt_vocab.save(dest / TGT_VOCAB)
    for name in tokenizer_files(run.cfg.data):
        (dest / name).write_bytes(run.files[name])
    if run.shortlist is not None:
        (dest / VMAP).write_text("".join(vmap_lines(run.shortlist, run.src_vocab.itos,
                                                    run.tgt_vocab.itos)), encoding="utf-8")
    if run.starters:
        (dest / STARTERS).write_text("".join(f"{s}\n" for s in run.starters), encoding="utf-8")
    info = {"format": 1, "engine": "ctranslate2", "checkpoint": str(run.checkpoint),
            "step": run.step, "quantization": quantization or "float32"}
    (dest / MARKER).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")


def vmap_lines(table: Shortlist, src_tokens: list[str], tgt_tokens: list[str]) -> list[str]:
    """The shortlist as CTranslate2's vocabulary map: `source<TAB>target target ...` lines, the
    frequent tokens on a line of empty source (always candidates; CTranslate2 adds <unk>,
    <bos> and <eos> itself). A token with white space in it cannot be written in this format
    and is left out (no tokenizer of mt makes one)."""
    def words(ids: list[int]) -> str:
        return " ".join(t for t in (tgt_tokens[i] for i in ids) if not _spaced(t))

    lines = [f"\t{words(table.frequent.tolist())}\n"]
    for s, token in enumerate(src_tokens):
        if (row := table.row(s)) and not _spaced(token):
            lines.append(f"{token}\t{words(row)}\n")
    return lines


def _spaced(token: str) -> bool:
    return not token or any(c.isspace() for c in token)


def export_info(export: Path) -> dict | None:
    """What an export was written from (its MARKER: checkpoint, step, ...); {} for an export
    without one, None for a damaged one."""
    try:
        info = json.loads((Path(export) / MARKER).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError:  # not UTF-8, not JSON
        return None
    ok = isinstance(info, dict) and isinstance(info.get("step", 0), int)
    return info if ok else None
