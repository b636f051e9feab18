"""`<unk>` in outputs, replaced before anyone reads them (decode.unk).

A word-level model writes `<unk>` for a word its target vocabulary lacks; a reader takes it for
a broken program. With decode.unk `replace` (the default) each `<unk>` of an output becomes,
first that applies:
- the word it stands for in a forced target prefix or a glossary term: a term with a word the
  vocabulary lacks is constrained with `<unk>` in that word's place (glossary.Matcher.terms),
  and the term's own word is written there;
- the source token that the step writing it attends to most (all decoder layers and heads
  averaged: the word alignment's weights, mt.decoding.align), copied as the source writes it
  (Luong et al., 2015): names, numbers and rare words are mostly written as they are.
And a number in the source that the model cannot read (a token outside its source vocabulary:
it sees `<unk>`) is written as it is where the model wrote for it: the output tokens that attend
most to it, each run of them becoming the number once (the model wrote "zwei" or `<unk>` for
an unknown "25"); where no token attends to it (the model dropped it), after the last token
that attends to a source token before it. `forbid`: the search never writes `<unk>` but as a
term's placeholder (mt.decoding.constraints), whose word is written as above. `show`: outputs
as the model wrote them (and unread numbers as it wrote for them).

Shapes: B rows, T target tokens, S source tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from mt.attention import Searched
from mt.decoding import align
from mt.glossary import occurrences
from mt.vocab import SPECIALS, UNK, Vocab

UNK_TOKEN = SPECIALS[UNK]

# a token that is a number as written: digits, with separators, signs, currency or percent
NUMBER = re.compile(r"[-+]?[$€£¥]?\d[\d.,:/'\u00a0\u202f]*%?")

Term = tuple[list[int], list[str]]  # a target term's ids (<unk> for a word the vocab lacks), tokens


def known_words(ids: list[int], prefix: Sequence[str], terms: Sequence[Term]) -> dict[int, str]:
    """Output position -> the token its <unk> stands for: the prefix's own token inside the
    prefix, a term's own word inside an occurrence of the term."""
    words = {j: prefix[j] for j in range(min(len(prefix), len(ids))) if ids[j] == UNK}
    for term_ids, term_tokens in terms:
        if UNK in term_ids:
            for start in occurrences(ids, term_ids):
                for k, t in enumerate(term_ids):
                    if t == UNK:
                        words.setdefault(start + k, term_tokens[k])
    return words


def unread_numbers(src: list[int], labels: list[str]) -> set[int]:
    """The positions of the source tokens (ids src, padded; labels as read) that are numbers
    the model reads as <unk>."""
    return {i for i, (t, label) in enumerate(zip(src, labels, strict=False))
            if t == UNK and NUMBER.fullmatch(label)}


def written(model, batch: Searched, sources: list[list[str]], prefixes: list[list[str]],
            terms: list[list[Term]], vocab: Vocab, labels: Callable[[list[str]], list[str]]
            ) -> list[tuple[list[str], list[str]]]:
    """Each output of a batch (in the order of batch.rows) as tokens with every <unk>
    replaced and each unread source number written, and what was written so, in order.
    sources, prefixes, terms: each row's source tokens (after the lead tags), forced prefix
    tokens and glossary terms; labels: tokens as a reader sees them (mt.attention.labels).
    model: for the attention, in one teacher-forced pass of the rows that need it; None (an
    engine without a model): the <unk>s no prefix or term explains are left out."""
    rows, outputs = batch.rows, batch.outputs
    out = [vocab.decode(ids) for ids in outputs]  # <unk> kept: positions are ids' to <eos>
    src = batch.src[:, batch.lead:].tolist()
    numbers = [unread_numbers(s, labels(t)) if UNK in s else set()
               for s, t in zip(src, sources, strict=True)]
    pending: list[tuple[int, list[int]]] = []  # (output, its <unk> positions left)
    for k, (b, ids) in enumerate(zip(rows, outputs, strict=True)):
        left = []
        if UNK in ids:
            words = known_words(ids, prefixes[b], terms[b])
            for j, w in words.items():
                out[k][j] = w
            left = [j for j, i in enumerate(ids[: len(out[k])]) if i == UNK and j not in words]
        if left or numbers[b]:
            pending.append((k, left))
    replaced = [[t for t, i in zip(tokens, ids) if i == UNK] for tokens, ids in
                zip(out, outputs, strict=True)]
    if pending and model is not None:
        picked = [rows[k] for k, _ in pending]
        weights = align.cross_attention(model, batch.src[picked],
                                        [outputs[k] for k, _ in pending],
                                        memory=batch.memory_rows(picked))
        for (k, left), w in zip(pending, weights, strict=True):
            source = sources[rows[k]]
            at = w[:, batch.lead: batch.lead + len(source)].argmax(-1).tolist()  # (T,)
            for j in left:
                out[k][j] = source[at[j]]
            out[k], replaced[k] = _numbers(out[k], outputs[k], at, source, numbers[rows[k]])
    for k, left in [] if model is not None else pending:  # no attention: those <unk>s go
        out[k] = [t for j, t in enumerate(out[k]) if j not in left]
        replaced[k] = [t for t in replaced[k] if t != UNK_TOKEN]
    return list(zip(out, replaced, strict=True))


def _numbers(tokens: list[str], ids: list[int], at: list[int], source: list[str],
             numbers: set[int]) -> tuple[list[str], list[str]]:
    """tokens with each run of those attending most to an unread source number (at: each
    one's source token) written as that number once, and a number no token attends to put
    after the last token that attends to a source token before it (the model dropped it);
    and what replaced <unk> or was written so, in order."""
    out, replaced, previous, where = [], [], None, []  # where: each output's source token
    for t, i, a in zip(tokens, ids, at, strict=False):
        if a in numbers:
            if a != previous:
                out.append(source[a])
                replaced.append(source[a])
                where.append(a)
            previous = a
            continue
        previous = None
        out.append(t)
        where.append(a)
        if i == UNK:
            replaced.append(t)
    for a in sorted(numbers - set(where), reverse=True):
        k = max((j + 1 for j, b in enumerate(where) if b < a), default=0)
        if k and k == len(out) and not any(c.isalnum() for c in out[-1]):
            k -= 1  # before the final punctuation
        out.insert(k, source[a])
        where.insert(k, a)
        replaced.append(source[a])
    return out, replaced
