"""The words a model would write for a glossary term's source, so that a constrained search
writes the term in their place rather than beside them (decode.glossary_replace).

Lexically constrained beam search holds a term somewhere in the output; nothing in it stops the
model from also writing its own translation of the term's source ("A man is getting ready to
the guy." for Mann -> guy). So the model first translates the lines without terms (the search
a line with no glossary gets: mt.translator keeps that output where it holds the line's terms
already); in the others, each output token whose step attends most to a term's source span
(all decoder layers and heads averaged: the word alignment's weights, mt.decoding.align), the
one that weighs the span most, is the model's own word for that term, in each of its casings.
The constrained search may not write those anywhere in that line (mt.decoding.constraints),
so it writes the term where the model would have written them. (Blocked only while the term
is pending, the model wrote the term early, where it fits worst, and its own word after it:
the toy model's "Wir Pudelhunde zwei und vierzig rote Hunde.")

Shapes: B rows, S source tokens, T target tokens.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from mt.decoding import align
from mt.decoding.request import Memory
from mt.vocab import EOS

Span = tuple[int, int, list[int]]  # a term's source tokens [start, stop) and its target ids


@torch.no_grad()
def own_words(model, src: torch.Tensor, outputs: list[list[int]], memory: Memory, lead: int,
              spans: list[list[Span]], cased: Callable[[int], set[int]]
              ) -> list[list[list[int]]]:
    """Per row of src (B, S), per span of spans[b]: the ids of the word the model's own
    translation outputs[b] (its search without terms) writes for that source span (cased: an
    id's other casings, `Man` for `man`), but any of the row's terms' own ids. memory: the
    model's encode(src)."""
    weights = align.cross_attention(model, src, outputs, memory=memory)
    out = []
    for row, y, w in zip(spans, outputs, weights, strict=True):
        terms = {t for _, _, term in row for t in term}
        w = w[:, lead:]  # (T, S) without the tag's columns
        at = w.argmax(-1).tolist() if y else []  # each output token's source token
        words = []
        for start, stop, _ in row:
            mine = [j for j, a in enumerate(at) if start <= a < stop and y[j] != EOS]
            # the one token that weighs the span most: "a" or "the" attending to "Mann" is
            # not the model's word for it, "man" is; where that is a term's, nothing to block
            best = max(mine, key=lambda j: float(w[j, start:stop].sum()), default=None)
            own = set() if best is None or y[best] in terms else set(cased(y[best])) - terms
            words.append(sorted(own))
        out.append(words)
    return out
