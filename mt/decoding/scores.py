"""Scores of hypotheses: the length penalty that every search divides a log-probability by,
and teacher-forced scores of given outputs (greedy's and sampling's, when scores are shown).

A hypothesis of n tokens is scored by its log-probability L (the sum over its tokens and the
closing <eos>) divided by a length penalty lp(n + 1), the length counting <eos>:
    gnmt      ((5 + m) / 6) ** alpha      (Wu et al. 2016; alpha = decode.length_penalty)
    average   m                           (plain per-token average)
    none      1
Every lp is >= 1 and non-decreasing in m for alpha >= 0.
"""

from __future__ import annotations

import torch

from mt.config import LENGTH_NORMS, DecodeConfig
from mt.decoding.search import Decodable
from mt.vocab import EOS, PAD, start_id


def length_penalty(length: torch.Tensor | int, norm: str, alpha: float) -> torch.Tensor | float:
    """lp(m) for hypotheses of m tokens, <eos> included; scores are log-probability / lp."""
    if norm == "gnmt":
        return ((5 + length) / 6) ** alpha
    if norm == "average":
        return length * 1.0
    if norm == "none":
        return length * 0.0 + 1.0  # a tensor for a tensor, like the others
    raise ValueError(f"unknown length normalisation {norm!r}; expected one of {LENGTH_NORMS}")


@torch.no_grad()
def sequence_scores(model: Decodable, src: torch.Tensor, hyps: list[list[int]],
                    cfg: DecodeConfig) -> list[float]:
    """Teacher-forced scores of given outputs (e.g. greedy's), on the same scale as beam's."""
    lengths = torch.tensor([len(h) + 1 for h in hyps], device=src.device)  # <eos> counted
    tgt_in = torch.full((len(hyps), int(lengths.max())), PAD, dtype=torch.long)
    tgt_out = tgt_in.clone()
    for i, h in enumerate(hyps):
        tgt_in[i, : len(h) + 1] = torch.tensor([start_id(model.cfg.decoder_start)] + h)
        tgt_out[i, : len(h) + 1] = torch.tensor(h + [EOS])
    tgt_in, tgt_out = tgt_in.to(src.device), tgt_out.to(src.device)
    lprobs = model.log_probs(model(src, tgt_in))  # (B, T, V)
    picked = lprobs.gather(-1, tgt_out[..., None]).squeeze(-1)  # (B, T)
    inside = torch.arange(tgt_out.size(1), device=src.device) < lengths[:, None]  # (B, T)
    logp = picked.masked_fill(~inside, 0.0).sum(-1)
    return (logp / length_penalty(lengths, cfg.length_norm, cfg.length_penalty)).tolist()


