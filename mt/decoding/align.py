"""Word alignments from cross-attention (`mt translate --align`), in the Pharaoh format: `i-j`
pairs, source word i and target word j, 0-based, the words being those of the text split at
whitespace (a SentencePiece piece or a spaCy token joined to its neighbour belongs to the word
its detokenized text falls in).

The cross-attention weights of all decoder layers and heads, averaged, at the step that
predicts target token j say where token j looks: kept by the search as it goes
(Hypothesis.attention), else (an ensemble, `--attention`) from one more teacher-forced pass
(cross_attention). A source word gets the sum of its tokens' weights, a target word the mean
of its tokens' rows, and each target word is linked to the source word it weighs most.
docs/decoding.md gives the measurements behind that choice (all layers and heads, the
predicting step).

Shapes: S source tokens, T target tokens, H heads.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mt.data import pad
from mt.tokenizers import Tokenizer
from mt.vocab import PAD, start_id


def token_words(tokens: Sequence[str], tok: Tokenizer) -> list[int]:
    """The whitespace word (0-based) of tok.detokenize(tokens) that each token falls in: the
    tokenizer's own `token_words` where it has one (one pass) and it can say, else one
    detokenize a prefix."""
    if (fast := getattr(tok, "token_words", None)) is not None and \
            (words := fast(tokens)) is not None:
        return words
    return [max(0, len(tok.detokenize(tokens[: k + 1]).split()) - 1) for k in range(len(tokens))]


@torch.no_grad()
def cross_attention(model, src: torch.Tensor, outputs: list[list[int]], layer: int | None = None,
                    heads: bool = False, end: bool = False, memory=None) -> list[torch.Tensor]:
    """src (B, S) and an output (ids) per row -> per row its (T_b, S_b) weights, averaged over
    layers and heads: row j is the step that predicts output token j. layer: that decoder
    layer's only; heads (with a layer): every head's, (H, T_b, S_b); end: and the row of the
    step that predicts <eos> (T_b + 1 rows). memory: the model's encode(src), if the caller
    has it (skips the encoder)."""
    tgt_in = pad([[start_id(model.cfg.decoder_start)] + y for y in outputs]).to(src.device)
    layers = model.cross_attention(src, tgt_in, memory)  # per layer (B, H, T + 1, S)
    if layer is None:
        weights = torch.stack([w.float().mean(1) for w in layers]).mean(0)  # (B, T + 1, S)
    else:
        weights = layers[layer].float()  # (B, H, T + 1, S)
        weights = weights if heads else weights.mean(1)
    lengths = (src != PAD).sum(1).tolist()
    return [weights[b, ..., : len(y) + end, : lengths[b]].cpu() for b, y in enumerate(outputs)]


def word_alignment(weights: torch.Tensor, src_words: list[int], tgt_words: list[int]
                   ) -> list[tuple[int, int]]:
    """weights (T, S) over tokens -> (i, j) pairs: each target word j with the source word i
    that its tokens weigh most (a word's weight: its tokens' sum on the source side, their mean
    on the target side), sorted."""
    if not src_words or not tgt_words:
        return []
    src = torch.tensor(src_words)
    tgt = torch.tensor(tgt_words)
    by_src = torch.zeros(weights.size(0), int(src.max()) + 1).index_add_(1, src, weights)
    by_word = torch.zeros(int(tgt.max()) + 1, by_src.size(1)).index_add_(0, tgt, by_src)
    best = by_word.argmax(1).tolist()  # a sum is a mean times the count: same argmax per row
    present = set(tgt_words)
    return sorted((i, j) for j, i in enumerate(best) if j in present)


def pharaoh(pairs: list[tuple[int, int]]) -> str:
    return " ".join(f"{i}-{j}" for i, j in pairs)
