"""Validation during training: loss and perplexity, and BLEU/chrF of greedy output, each rank
taking its share of the work."""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from mt.checkpoint import Run
from mt.config import Config
from mt.loss import label_smoothed_loss
from mt.metrics import score
from mt.model import Seq2Seq
from mt.train.distributed import Group
from mt.train.run_data import RunData
from mt.train.step import to_device
from mt.translator import Translator
from mt.vocab import PAD


@torch.no_grad()
def validate(cfg: Config, model: Seq2Seq, data: RunData, step: int, group: Group,
             amp: torch.dtype | None) -> dict:
    """val_loss and val_ppl on the validation pairs; with train.eval_bleu, val_bleu and
    val_chrf of the greedy translations of the validation text.

    Under torchrun each rank takes its share of the batches and of the sentences to decode;
    the sums are all-reduced and the translations gathered, so every rank returns the same
    result.
    """
    model.eval()
    sums = torch.zeros(2, device=group.device)  # NLL sum, target tokens
    for batch in data.val.batches(cfg.train.max_tokens)[group.rank::group.world]:
        batch = to_device(batch, group.device)
        with torch.autocast(group.device.type, dtype=amp, enabled=amp is not None):
            states = model(batch.src, batch.tgt_in, project=False)
        nll = label_smoothed_loss(states, model.generator.weight, batch.tgt_out, 0.0, amp,
                                  model.logits_bias)[1]
        sums += torch.stack([nll, (batch.tgt_out != PAD).sum().float()])
    group.sum(sums)
    nll_sum, n = sums.tolist()
    result = {"val_loss": round(nll_sum / n, 4), "val_ppl": round(math.exp(nll_sum / n), 2)}
    if cfg.train.eval_bleu:
        run = Run(cfg, model, data.src_vocab, data.tgt_vocab, step, data.src_tok,
                  data.tgt_tok)
        # fast, whatever decode.beam is; never compiled: the weights change by the next one
        greedy = replace(cfg.decode, beam=1, nbest=1, compile="off")
        mine = Translator(run, greedy, device=group.device).translate(
            data.val_src[group.rank::group.world])
        scores = score(group.interleave(mine), data.val_ref, cfg.data.tgt_lang)
        result.update(val_bleu=scores["bleu"], val_chrf=scores["chrf"])
    model.train()
    return result
