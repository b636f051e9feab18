"""Search over the model's encode/decode interface: batched greedy decoding with a KV cache.

Shapes: B batch, S source length, V vocab.
"""

from __future__ import annotations

import torch

from mt.model import Seq2Seq
from mt.vocab import BOS, EOS


def max_lengths(src_mask: torch.Tensor, a: float, b: int, limit: int) -> torch.Tensor:
    """Per-sentence output budget a * src_len + b, capped so positions fit the model: (B,)."""
    src_len = src_mask.reshape(src_mask.size(0), -1).sum(-1)
    return (a * src_len + b).long().clamp(min=1, max=limit - 1)


@torch.no_grad()
def greedy(model: Seq2Seq, src: torch.Tensor, max_len_a: float = 1.5, max_len_b: int = 10,
           ) -> list[list[int]]:
    """src (B, S) -> for each sentence the argmax token ids, without <bos>/<eos>.

    The encoder runs once; each step feeds only the newest token and extends the cache.
    Finished sentences leave the batch, so later steps cost only what is still running.
    """
    src_mask = model.src_mask(src)
    cache = model.start_cache(model.encode(src, src_mask), src_mask)
    limits = max_lengths(src_mask, max_len_a, max_len_b, model.cfg.max_positions)
    B = src.size(0)
    rows = torch.arange(B, device=src.device)  # original sentence of each live row
    out: list[list[int]] = [[] for _ in range(B)]
    hyp = torch.empty(B, 0, dtype=torch.long, device=src.device)  # (b, t) tokens so far
    prev = torch.full((B, 1), BOS, dtype=torch.long, device=src.device)
    for t in range(int(limits.max()) + 1):
        logits, cache = model.decode(prev, cache)
        tok = logits[:, -1].argmax(-1)  # (b,)
        tok = torch.where(limits[rows] <= t, torch.full_like(tok, EOS), tok)
        hyp = torch.cat([hyp, tok[:, None]], dim=1)
        done = tok == EOS
        if done.any():
            for i in done.nonzero().flatten().tolist():
                out[rows[i]] = hyp[i, :-1].tolist()
            keep = (~done).nonzero().flatten()
            if keep.numel() == 0:
                break
            rows, hyp, tok, cache = rows[keep], hyp[keep], tok[keep], cache.reorder(keep)
        prev = tok[:, None]
    return out
