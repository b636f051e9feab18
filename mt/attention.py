"""What a batch's translations looked at in their source: each one's word alignment
(mt.decoding.align) and its cross-attention (records.Attention), given to the translations
after the search, from what the search kept or one teacher-forced pass of the decoder.
`Searched` is the batch as the search left it, which this and mt.confidence read.

Shapes: B rows of the batch, S source tokens, T target tokens, H heads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from mt.decoding import align
from mt.decoding.request import Hypothesis, Memory
from mt.records import Attention, AttentionSpec, Translation
from mt.tokenizers import Tokenizer
from mt.vocab import EOS, PAD, SPECIALS, Vocab


@dataclass
class Searched:
    """A batch as the search left it: its source, the hypotheses found for each row and their
    translations (which attend and mt.confidence.confide complete in place)."""

    src: torch.Tensor  # (B, S) source ids, `lead` tag ids first
    lead: int  # tag tokens before each row's source
    memory: Memory  # the model's encode(src), the search's encoder output
    found: list[list[Hypothesis]]  # each row's hypotheses
    out: list[list[Translation]]  # their translations, as many

    @property
    def rows(self) -> list[int]:
        """The row of each output (hypotheses of all rows, in order)."""
        return [b for b, hyps in enumerate(self.found) for _ in hyps]

    @property
    def outputs(self) -> list[list[int]]:
        """Each output's ids (no <eos>), in the order of rows."""
        return [h.tokens for hyps in self.found for h in hyps]

    def translations(self) -> Iterator[Translation]:
        """Each output's translation, in the order of rows."""
        return (t for ts in self.out for t in ts)

    def memory_rows(self, rows: list[int]) -> Memory:
        """The encoder output (an ensemble's: one per model) of the batch's rows `rows`; None
        where the search's caller did not keep it."""
        return memory_rows(self.memory, rows)


def memory_rows(memory: Memory, rows: list[int]) -> Memory:
    """An encoder output's (an ensemble's: one per model) rows `rows`; None for None (not
    encoded yet: its reader encodes)."""
    if memory is None:
        return None
    return [m[rows] for m in memory] if isinstance(memory, list) else memory[rows]


def labels(tokens: list[str], tokenizer: Tokenizer) -> list[str]:
    """Each token as a reader sees it, detokenized alone: spaCy's joiner marks and
    SentencePiece's word-start mark removed (a token that is only marks stays as it is)."""
    return [tokenizer.detokenize([t]).strip() or t for t in tokens]


def rounded(weights: list, decimals: int | None) -> list:
    if decimals is None:
        return weights
    if weights and isinstance(weights[0], list):
        return [rounded(w, decimals) for w in weights]
    return [round(v, decimals) for v in weights]


def attend(model, batch: Searched, tokens: list[list[str]], alignment: bool,
           attention: AttentionSpec | None, src_tok: Tokenizer, tgt_tok: Tokenizer,
           tgt_vocab: Vocab) -> None:
    """Give each translation of a batch (tokens: each row's source tokens, after the lead tag
    tokens) its word alignment (mt.decoding.align) and/or its cross-attention, from one more
    teacher-forced pass of the decoder over all of them (two when the attention asked for is
    not the alignment's), or from the attention the search kept."""
    src, lead, rows, outputs = batch.src, batch.lead, batch.rows, batch.outputs
    memory = batch.memory_rows(rows)
    averaged = shown = [None] * len(rows)  # one teacher-forced pass each, where needed
    kept = [h.attention for hyps in batch.found for h in hyps]
    lengths = (src[rows] != PAD).sum(1).tolist()
    if alignment and attention is None and all(a is not None for a in kept):
        averaged = [a[:, :n].cpu() for a, n in zip(kept, lengths, strict=True)]  # the search's
    elif alignment or (attention is not None and attention.averaged):
        averaged = shown = align.cross_attention(model, src[rows], outputs,
                                                 memory=memory)
    if attention is not None and not attention.averaged:
        shown = align.cross_attention(model, src[rows], outputs, attention.layer,
                                      attention.heads, attention.end, memory)
    words = [align.token_words(t, src_tok) for t in tokens] if alignment else []
    src_labels = [labels(t, src_tok) for t in tokens] if attention is not None else []
    for b, y, w, a, t in zip(rows, outputs, averaged, shown, batch.translations(),
                             strict=True):
        out_tokens = tgt_vocab.decode(y)
        if alignment:
            tgt = align.token_words(out_tokens, tgt_tok)
            t.alignment = align.pharaoh(align.word_alignment(w[:, lead:], words[b], tgt))
        if attention is not None:  # (..., T, S) without the tag's columns
            a = a[..., lead:]
            ends = [SPECIALS[EOS]] if attention.end else []
            t.attention = Attention(tokens[b], out_tokens + ends,
                                    rounded(a.tolist(), attention.decimals), src_labels[b],
                                    labels(out_tokens, tgt_tok) + ends)
