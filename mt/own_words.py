"""The words a model would write for a glossary term's source, so that a constrained search
writes the term in their place rather than beside them (decode.glossary_replace).

Lexically constrained beam search holds a term somewhere in the output; nothing in it stops the
model from also writing its own translation of the term's source ("A man is getting ready to
the guy." for Mann -> guy). So the model first translates the lines without terms (the search
a line with no glossary gets: mt.translator keeps that output where it holds the line's terms
already); in the others, the output token that needs the term's source span most (its
log-probability falls most when the span is hidden) is the model's own word for that term, in
each of its casings.
The constrained search may not write those anywhere in that line (mt.decoding.constraints),
so it writes the term where the model would have written them. (Blocked only while the term
is pending, the model wrote the term early, where it fits worst, and its own word after it:
the toy model's "Wir Pudelhunde zwei und vierzig rote Hunde.")

Shapes: B rows, S source tokens, T target tokens.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from mt.confidence import teacher_forced
from mt.data import pad
from mt.decoding.request import Memory
from mt.vocab import EOS, UNK, start_id

Span = tuple[int, int, list[int]]  # a term's source tokens [start, stop) and its target ids


@torch.no_grad()
def own_words(model, src: torch.Tensor, outputs: list[list[int]], memory: Memory, lead: int,
              spans: list[list[Span]], cased: Callable[[int], set[int]]
              ) -> list[list[list[int]]]:
    """Per row of src (B, S), per span of spans[b]: the ids of the word the model's own
    translation outputs[b] (its search without terms) writes for that source span (cased: an
    id's other casings, `Man` for `man`), but any of the row's terms' own ids. memory: the
    model's encode(src).

    That word is the output token whose log-probability falls most when the span is hidden
    (its source tokens made <unk>): the one that needed it. The attention's argmax, tried
    first, missed half of them on a small model ("dog" attending to the verb beside "Hund")
    and picked "A" for a noun at the start."""
    pairs = [(b, k) for b, row in enumerate(spans) for k in range(len(row))]
    words: list[list[list[int]]] = [[[] for _ in row] for row in spans]
    if not pairs:
        return words
    tgt_in = pad([[start_id(model.cfg.decoder_start)] + y for y in outputs]).to(src.device)
    rows = torch.tensor([b for b, _ in pairs], device=src.device)
    hidden = src[rows].clone()  # (P, S): each (row, span) pair's source, the span hidden
    for p, (b, k) in enumerate(pairs):
        start, stop, _ = spans[b][k]
        hidden[p, lead + start:lead + stop] = UNK
    seen = _chosen(model, src, tgt_in, memory)  # (B, T + 1)
    unseen = _chosen(model, hidden, tgt_in[rows], None)  # (P, T + 1)
    for p, (b, k) in enumerate(pairs):
        y, terms = outputs[b], {t for _, _, term in spans[b] for t in term}
        drop = (seen[b] - unseen[p])[:len(y)].tolist()  # what each token lost without the span
        mine = [j for j in range(len(y)) if y[j] not in terms and y[j] != EOS and drop[j] > 0]
        best = max(mine, key=lambda j: drop[j], default=None)
        words[b][k] = [] if best is None else sorted(set(cased(y[best])) - terms)
    return words


def _chosen(model, src: torch.Tensor, tgt_in: torch.Tensor, memory: Memory) -> torch.Tensor:
    """The log-probability of each next token of tgt_in (B, T + 1) (its last: padding), (B, T+1)."""
    lprobs = teacher_forced(model, src, tgt_in, memory)[0]  # (B, T + 1, V)
    after = torch.cat([tgt_in[:, 1:], tgt_in[:, :1]], 1)  # (B, T + 1): the token each step chose
    return lprobs.gather(-1, after.unsqueeze(-1)).squeeze(-1).float()
