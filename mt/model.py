"""Transformer encoder-decoder with an explicit decoding cache.

Shapes: B batch (decoder rows), S source length, T target length (the positions a call
decodes), P target positions already in the cache, L any sequence length (keys, embeddings),
D model width, H heads, Dh = D / H head width, V vocabulary, G decoder rows per source sentence
(1, or K, the beam size, in beam search). Padding is mt.vocab.PAD, as everywhere in mt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from mt.config import ModelConfig
from mt.kernels import Dropout, attention, extend, logsumexp, logsumexp_entropy, relu_dropout
from mt.static_cache import KV, StaticCache
from mt.vocab import PAD


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.kv_proj = nn.Linear(d_model, 2 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        B, L, D = x.shape
        return x.view(B, L, self.n_heads, D // self.n_heads).transpose(1, 2)  # (B, H, L, Dh)

    def project_kv(self, x: torch.Tensor) -> KV:
        k, v = self.kv_proj(x).chunk(2, dim=-1)  # (B, L, D) each
        return self._split(k), self._split(v)

    def forward(self, x: torch.Tensor, kv: KV, mask: torch.Tensor | None, is_causal: bool = False,
                need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (B, T, D) queries; kv keys/values (B/G, H, L, Dh), already projected (possibly
        cached) -> (B, T, D), and if need_weights the weights (B, H, T, L)."""
        B, T, D = x.shape
        q = self._split(self.q_proj(x))  # (B, H, T, Dh)
        # Beam search: G consecutive rows share one sentence's encoder keys/values, so they
        # attend as one block of G*T queries. Only for cross-attention.
        G = B // kv[0].size(0)
        p = self.dropout if self.training else 0.0
        out, weights = attention(_fold(q, G), kv[0], kv[1], mask, is_causal, p, need_weights)
        if weights is not None:
            weights = _unfold(weights, G, T)
        out = _unfold(out, G, T).transpose(1, 2).reshape(B, T, D)  # heads concatenated
        return self.out_proj(out), weights


def _fold(q: torch.Tensor, G: int) -> torch.Tensor:
    """(B, H, T, Dh) -> (B/G, H, G*T, Dh): each block of G rows as one row of G*T queries."""
    if G == 1:
        return q
    B, H, T, Dh = q.shape
    return q.view(-1, G, H, T, Dh).transpose(1, 2).reshape(-1, H, G * T, Dh)


def _unfold(y: torch.Tensor, G: int, T: int) -> torch.Tensor:
    """`_fold` undone on a result: (B/G, H, G*T, X) -> (B, H, T, X), X being Dh or L."""
    if G == 1:
        return y
    H, X = y.size(1), y.size(-1)
    return y.view(-1, H, G, T, X).transpose(1, 2).reshape(-1, H, T, X)


ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}  # model.activation


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str = "relu"):
        super().__init__()
        self.activation = activation
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), ACTIVATIONS[activation](),
                                 Dropout(dropout), nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The layers stay in `net`, under the names checkpoints use. ReLU and dropout run as
        # one (relu_dropout: its backward keeps one copy of the hidden activations, not three).
        # A decoding model's first layer may apply the ReLU inside its product
        # (mt.decoding.packed): then it is not applied twice.
        first, act, drop, last = self.net
        if self.activation == "relu":
            hidden = first(x)
            if not getattr(first, "relu", False):
                hidden = relu_dropout(hidden, drop.p, self.training)
            return last(hidden)
        return last(drop(act(first(x))))


class Residual(nn.Module):
    """x + sublayer, with LayerNorm before the sublayer (pre-norm) or after the sum (post-norm).

    In two halves for sublayers with more than one output: `post(x, sublayer(pre(x)))`.
    """

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm, self.drop, self.pre_norm = nn.LayerNorm(d_model), Dropout(dropout), pre_norm

    def pre(self, x: torch.Tensor) -> torch.Tensor:
        """The sublayer's input."""
        return self.norm(x) if self.pre_norm else x

    def post(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The residual stream after the sublayer's output y."""
        return x + self.drop(y) if self.pre_norm else self.norm(x + self.drop(y))

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        return self.post(x, sublayer(self.pre(x)))


def _rate(p: float | None, default: float) -> float:
    return default if p is None else p


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        p_attn = _rate(cfg.attention_dropout, cfg.dropout)
        self.attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, p_attn)
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, _rate(cfg.activation_dropout, cfg.dropout),
                              cfg.activation)
        self.res1 = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.res2 = Residual(cfg.d_model, cfg.dropout, cfg.pre_norm)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """x (B, S, D), src_mask (B, 1, 1, S) -> (B, S, D)."""
        y = self.res1.pre(x)
        x = self.res1.post(x, self.attn(y, self.attn.project_kv(y), src_mask)[0])
        return self.res2(x, self.ff)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        p_attn = _rate(cfg.attention_dropout, cfg.dropout)
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, p_attn)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, p_attn)
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, _rate(cfg.activation_dropout, cfg.dropout),
                              cfg.activation)
        self.res = nn.ModuleList(Residual(cfg.d_model, cfg.dropout, cfg.pre_norm) for _ in range(3))

    def forward(self, x: torch.Tensor, past: KV | None, cross: KV, src_mask: torch.Tensor,
                self_mask: torch.Tensor | None, is_causal: bool, need_weights: bool = False,
                order: torch.Tensor | None = None) -> tuple[torch.Tensor, KV, torch.Tensor | None]:
        """x (B, T, D) are the new positions; past holds keys/values of earlier ones, row
        order[i] of past belonging to row i of x (None: row i).

        Returns the new states, the extended self-attention keys/values and, if need_weights,
        the cross-attention weights (B, H, T, S).
        """
        # 1) self-attention over the earlier positions and these
        y = self.res[0].pre(x)
        k, v = self.self_attn.project_kv(y)  # (B, H, T, Dh) each
        if past is not None:
            k, v = extend(past[0], order, k, 2), extend(past[1], order, v, 2)  # (B, H, P+T, Dh)
        x = self.res[0].post(x, self.self_attn(y, (k, v), self_mask, is_causal)[0])
        x, weights = self._cross_ff(x, cross, src_mask, need_weights)
        return x, (k, v), weights

    def write(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
              pos: torch.Tensor, length: int | None, cross: KV, src_mask: torch.Tensor,
              self_mask: torch.Tensor | None, need_weights: bool = False
              ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One new position per row, x (B, 1, D) at position pos (1,), its keys/values
        written into the preallocated keys/values (B, H, L, Dh) (mt.static_cache), which it
        attends to: their first `length` positions, or (length None) all L under self_mask
        (1, 1, 1, L). Returns the new states and, if need_weights, the cross-attention weights."""
        y = self.res[0].pre(x)
        k, v = self.self_attn.project_kv(y)  # (B, H, 1, Dh) each
        keys.index_copy_(2, pos, k)
        values.index_copy_(2, pos, v)
        if length is not None:
            keys, values = keys[:, :, :length], values[:, :, :length]
        x = self.res[0].post(x, self.self_attn(y, (keys, values), self_mask)[0])
        return self._cross_ff(x, cross, src_mask, need_weights)

    def _cross_ff(self, x: torch.Tensor, cross: KV, src_mask: torch.Tensor, need_weights: bool
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
        # 2) cross-attention over the source
        out, weights = self.cross_attn(self.res[1].pre(x), cross, src_mask,
                                       need_weights=need_weights)
        x = self.res[1].post(x, out)
        # 3) feed-forward
        return self.res[2](x, self.ff), weights


def _pick(kv: KV, index: torch.Tensor) -> KV:
    # index_select, not kv[0][index]: on CPU, indexing with a tensor takes torch's general
    # advanced-indexing path, slower for whole rows (benchmarks/bench_decode.py --profile
    # reports the time of cache reorders)
    return kv[0].index_select(0, index), kv[1].index_select(0, index)


@dataclass
class DecoderCache:
    """Everything incremental decoding carries between steps.

    Rows (the decoder's batch) come in blocks of `group` consecutive rows per source sentence:
    1 normally, K in beam search, whose K hypotheses share one copy of the encoder's keys and
    values rather than K copies (less memory, and nothing to copy when hypotheses move).
    """

    pos: int  # P, the target positions decoded so far
    src_mask: torch.Tensor  # (B/G, 1, 1, S), one per source sentence
    cross: list[KV]  # per layer: encoder keys/values, computed once, (B/G, H, S, Dh)
    past: list[KV | None]  # per layer: self-attention keys/values so far, (B0, H, P, Dh)
    group: int = 1  # G, rows per source sentence
    # Row i continues row order[i] of `past` (B,); None: B0 == B, in order. Reordering is
    # deferred to the next decoding step, which copies the cache anyway to extend it.
    order: torch.Tensor | None = None

    def reorder(self, index: torch.Tensor, group: int | None = None) -> DecoderCache:
        """Select/repeat rows: beam search moves hypotheses, finished rows are dropped.

        The result has `group` rows per sentence (default: unchanged). With group > 1, `index`
        must come in blocks of `group`, each drawn from a single sentence's rows (as beam
        search does); sentences are then picked by block.
        """
        group = group or self.group
        sent = index[::group] // self.group
        b = self.src_mask.size(0)
        if sent.numel() == b and torch.equal(sent, torch.arange(b, device=sent.device)):
            src_mask, cross = self.src_mask, self.cross  # same sentences: nothing to copy
        else:
            src_mask, cross = self.src_mask[sent], [_pick(kv, sent) for kv in self.cross]
        order = index if self.order is None else self.order[index]
        return DecoderCache(self.pos, src_mask, cross, self.past, group, order)

    def to_static(self, length: int, padded: bool = False, core=None) -> StaticCache:
        """This fresh cache (nothing decoded yet) as a StaticCache of `length` positions
        (mt.static_cache.StaticCache.start has the rest)."""
        assert self.pos == 0, "only a fresh cache becomes static"
        return StaticCache.start(self.src_mask, self.cross, self.group, length, padded, core)


class PositionalEncoding(nn.Module):
    """Fixed sinusoids (Vaswani et al. 2017): interleaved (sin, cos, sin, ...), or in Marian's
    layout (every sine, then every cosine) for model.positions: marian."""

    def __init__(self, d_model: int, max_positions: int, layout: str = "sinusoid"):
        super().__init__()
        pos = torch.arange(max_positions).unsqueeze(1)
        table = torch.zeros(max_positions, d_model)
        if layout == "marian":  # in float64, as transformers computes it: equal tables
            freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
            half = (d_model + 1) // 2
            table[:, :half] = torch.sin(pos * freq)
            table[:, half:] = torch.cos(pos * freq[: d_model // 2])
        else:
            freq = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
            table[:, 0::2] = torch.sin(pos * freq)
            table[:, 1::2] = torch.cos(pos * freq[: d_model // 2])
        self.register_buffer("table", table, persistent=False)

    def forward(self, start: int, length: int) -> torch.Tensor:
        if start + length > self.table.size(0):
            raise ValueError(f"sequence of {start + length} positions exceeds "
                             f"model.max_positions={self.table.size(0)}")
        return self.table[start:start + length]  # (L, D)


class Seq2Seq(nn.Module):
    def __init__(self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int):
        super().__init__()
        self.cfg = cfg
        D = cfg.d_model
        self.tgt_embed = nn.Embedding(tgt_vocab_size, D, padding_idx=PAD)
        self.src_embed = (self.tgt_embed if cfg.tie_all
                          else nn.Embedding(src_vocab_size, D, padding_idx=PAD))
        self.positions = PositionalEncoding(D, cfg.max_positions, cfg.positions)
        self.drop = Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_enc_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_dec_layers))
        # Pre-norm stacks leave the residual stream unnormalized: close each with a LayerNorm.
        self.enc_norm = nn.LayerNorm(D) if cfg.pre_norm else nn.Identity()
        self.dec_norm = nn.LayerNorm(D) if cfg.pre_norm else nn.Identity()
        self.generator = nn.Linear(D, tgt_vocab_size, bias=False)
        if cfg.logits_bias:  # a buffer: loaded, saved, never trained (as Marian's)
            self.register_buffer("logits_bias", torch.zeros(tgt_vocab_size))
        else:
            self.logits_bias = None
        self._init_weights()
        if cfg.tie_output or cfg.tie_all:
            self.generator.weight = self.tgt_embed.weight

    def _init_weights(self) -> None:
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed" not in name:
                nn.init.xavier_uniform_(p)
        # A list, not a set: a set's order varies between runs, and so would the initial weights.
        embeddings = [self.tgt_embed]
        if self.src_embed is not self.tgt_embed:
            embeddings.append(self.src_embed)
        for emb in embeddings:
            nn.init.normal_(emb.weight, std=self.cfg.d_model ** -0.5)
            with torch.no_grad():
                emb.weight[PAD].zero_()

    def _embed(self, emb: nn.Embedding, ids: torch.Tensor, start: int | torch.Tensor
               ) -> torch.Tensor:
        """ids (B, L) from position start on -> (B, L, D). A tensor start (1,) is read inside
        the graph, so one compiled step serves every position (L is 1 then)."""
        x = emb(ids)  # (B, L, D)
        if self.cfg.scale_embedding:
            x = x * math.sqrt(self.cfg.d_model)
        pe = (self.positions(start, ids.size(1)) if isinstance(start, int)
              else self.positions.table.index_select(0, start))  # (L, D)
        return self.drop(x + pe.to(x.dtype))

    def src_mask(self, src: torch.Tensor) -> torch.Tensor:
        return (src != PAD)[:, None, None, :]  # (B, 1, 1, S)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """src (B, S) -> memory (B, S, D)."""
        x = self._embed(self.src_embed, src, 0)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return self.enc_norm(x)

    def start_cache(self, memory: torch.Tensor, src_mask: torch.Tensor) -> DecoderCache:
        cross = [layer.cross_attn.project_kv(memory) for layer in self.decoder]
        if not torch.is_grad_enabled():
            # Decoding reads these at every step; as strided views of the projection, each
            # step's matmul would copy them again, which shows in greedy's speed on CPU
            # (benchmarks/bench_decode.py).
            cross = [(k.contiguous(), v.contiguous()) for k, v in cross]
        return DecoderCache(0, src_mask, cross, [None] * len(self.decoder))

    def decode(self, tgt: torch.Tensor, cache: DecoderCache, need_weights: bool = False
               ) -> tuple[torch.Tensor, DecoderCache] | tuple[torch.Tensor, DecoderCache, list]:
        """tgt (B, T): the next T target tokens -> decoder states (B, T, D) and the extended
        cache; with need_weights, a third item: each layer's cross-attention weights
        (B, H, T, S). `generator` turns states into logits, only where the caller needs them.

        Training passes the whole shifted target to a fresh cache; incremental decoding
        passes one token at a time.
        """
        if isinstance(cache, StaticCache):
            return cache.decode(self, tgt, need_weights)
        T, P = tgt.size(1), cache.pos
        x = self._embed(self.tgt_embed, tgt, P)
        # A fresh multi-token call is plain causal attention; after a prefix, queries at
        # P..P+T-1 may see keys 0..P+i, which needs an explicit mask; one new token sees all.
        is_causal = P == 0 and T > 1
        self_mask = None
        if P > 0 and T > 1:
            self_mask = torch.ones(T, P + T, dtype=torch.bool, device=tgt.device).tril(P)
        past, weights = [], []
        for layer, kv, cross in zip(self.decoder, cache.past, cache.cross):
            x, new_kv, w = layer(x, kv, cross, cache.src_mask, self_mask, is_causal,
                                 need_weights, cache.order)
            past.append(new_kv)
            weights.append(w)
        cache = DecoderCache(P + T, cache.src_mask, cache.cross, past, cache.group)
        return (self.dec_norm(x), cache) + ((weights,) if need_weights else ())

    def decode_static(self, tokens: torch.Tensor, pos: torch.Tensor, keys: list[torch.Tensor],
                      values: list[torch.Tensor], cross: list[KV], src_mask: torch.Tensor,
                      length: int | None = None, need_weights: bool = False
                      ) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
        """One decoding step over preallocated self-attention keys/values (mt.static_cache):
        tokens (B, 1) at position pos (1,), written into each layer's keys/values
        (B, H, L, Dh), with cross (B/G, H, S, Dh) and src_mask (B/G, 1, 1, S) -> decoder
        states (B, 1, D) and each layer's cross-attention weights (B, H, 1, S) (None without
        need_weights). Attends to the first `length` positions, or (None) to all L under a
        mask: shapes that never change from step to step, what a compiled step needs."""
        x = self._embed(self.tgt_embed, tokens, pos)
        self_mask = None
        if length is None:
            # (1, 1, 1, L): as every attention form takes it (torch's fused kernel, which bf16
            # takes, refuses a mask of one dimension)
            self_mask = (torch.arange(keys[0].size(2), device=pos.device) <= pos).view(1, 1, 1, -1)
        weights = []
        for layer, k, v, kv in zip(self.decoder, keys, values, cross, strict=True):
            x, w = layer.write(x, k, v, pos, length, kv, src_mask, self_mask, need_weights)
            weights.append(w)
        return self.dec_norm(x), weights

    @property
    def vocab_size(self) -> int:
        return self.generator.out_features

    def next_scores(self, states: torch.Tensor) -> torch.Tensor:
        """Decoder states (..., D) -> the generator's logits (..., V)
        (mt.decoding.search.Decodable)."""
        if self.logits_bias is None:
            return self.generator(states)
        # the bias added inside the matrix product: no second pass over the (..., V) logits
        return F.linear(states, self.generator.weight, self.logits_bias.to(states.dtype))

    def log_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """generator's logits (..., V) -> float32 log-probabilities, as searches score them."""
        return logits.float().log_softmax(-1)

    def log_normalizer(self, logits: torch.Tensor) -> torch.Tensor:
        """float32 logits (r, V) -> (r,) what log_probs subtracts from each row: its
        logsumexp."""
        return logsumexp(logits)

    def normalizer_entropy(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log_normalizer of float32 logits (r, V), and each row's entropy (r,), as a traced
        search records them (mt.decoding.record)."""
        return logsumexp_entropy(logits)

    @torch.no_grad()
    def cross_attention(self, src: torch.Tensor, tgt_in: torch.Tensor,
                        memory: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Teacher-forced pass (tgt_in (B, T)); each decoder layer's cross-attention weights
        (B, H, T, S), as `decode` returns them. memory: encode(src), if the caller has it."""
        src_mask = self.src_mask(src)
        memory = self.encode(src, src_mask) if memory is None else memory
        cache = self.start_cache(memory, src_mask)
        return self.decode(tgt_in, cache, need_weights=True)[2]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, project: bool = True
                ) -> torch.Tensor:
        """Teacher-forced logits (B, T, V); without `project`, the decoder states (B, T, D)
        that the generator would project (mt.loss projects them a slice at a time)."""
        src_mask = self.src_mask(src)
        memory = self.encode(src, src_mask)
        states = self.decode(tgt_in, self.start_cache(memory, src_mask))[0]
        return self.next_scores(states) if project else states


def make_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> Seq2Seq:
    return Seq2Seq(cfg, src_vocab_size, tgt_vocab_size)
