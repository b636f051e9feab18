"""Sentence starters: the capitalized tokens that begin a line of the run's training sources far
more often than they occur inside one (Punkt's "frequent sentence starters", Kiss & Strunk
2006, learned here from a corpus that is one sentence a line).

A paragraph whose sentences lack final punctuation (image captions, titles, list items joined
into one line) runs them together, and the sentencizer, which splits after punctuation, gives
them to the model as one: it translates one of the two. A starter right after a word (no
punctuation between) marks where the next sentence begins: *Zwei Männer in einer Stadt Ein
Mann fährt Rad* is two sentences; *Der Mann sagte, Die Linke ...* is not split (a comma).
Training learns them from its token cache entries (mt.train.run_data), checkpoints carry them,
and the splitter asks them (mt.document.segment); docs/documents.md says what they find and
miss.

It lives with the documents that use it, not with the token cache it reads: `learn` takes the
cache's entries as they are given (their source ids, offsets, vocabulary and counts) and
imports nothing of mt.token_cache, so training (a layer beside mt.document) calls it with
its entries and the cache itself needs nothing from here.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence

import numpy as np

SHARE = 0.95  # of a token's occurrences that begin a line
LEAST = 10  # lines it begins, at least
MAX_STARTERS = 1000  # the most frequent, at most (a checkpoint carries them)


def _key(tokens: Sequence[str]) -> str:
    """A word's tokens as a starter names them: trailing tokens without a letter or digit (the
    punctuation that ends a word in the text) dropped, the rest joined by spaces."""
    end = len(tokens)
    while end > 1 and not any(c.isalnum() for c in tokens[end - 1]):
        end -= 1
    return " ".join(tokens[:end])


def learn(entries: Sequence, share: float = SHARE, least: int = LEAST) -> list[str]:
    """The starters of the source side of token cache entries (mt.token_cache.entry), most
    frequent first: words beginning with a capital letter that begin at least `least` lines,
    whose first token's occurrences begin a line at least `share` of the time. A word is its
    tokens up to the next one that begins a word (SentencePiece's word mark; with word tokens,
    every token is a word), named by `_key`: "▁T oday", never "▁T" alone, so that a word that
    only shares a starter's first piece ("Einrad" of "Ein") is not taken for one."""
    first: collections.Counter = collections.Counter()
    total: collections.Counter = collections.Counter()
    words: collections.Counter = collections.Counter()
    for entry in entries:
        array = entry.data().src
        ids, offsets = np.asarray(array.ids).astype(np.int64), np.asarray(array.offsets)
        itos = entry.src_vocab.itos
        marked = np.array([t.startswith("\u2581") for t in itos])
        begins = marked if marked.any() else np.ones(len(itos), dtype=bool)
        starts = offsets[:-1][offsets[1:] > offsets[:-1]]  # not an empty line's
        counts = np.bincount(ids[starts], minlength=len(itos))
        every = entry.counts("src")
        capital = {i for i in np.flatnonzero(counts >= 1).tolist()
                   if itos[i].lstrip("\u2581")[:1].isupper()}
        for i in capital:
            first[itos[i]] += int(counts[i])
            total[itos[i]] += every[itos[i]]
        ends = np.append(offsets[1:], 0)[np.searchsorted(offsets, starts, side="right") - 1]
        later = np.flatnonzero(begins[ids])  # where each word begins
        for start, end in zip(starts.tolist(), ends.tolist()):
            if int(ids[start]) in capital:
                at = int(np.searchsorted(later, start, side="right"))
                stop = min(end, int(later[at])) if at < len(later) else end
                words[_key([itos[i] for i in ids[start:stop].tolist()])] += 1
    piece = {t for t, n in first.items() if n >= least and n >= share * total[t]}
    found = [w for w, n in words.items() if n >= least and w.split(" ")[0] in piece]
    return sorted(found, key=lambda w: (-words[w], w))[:MAX_STARTERS]


def starts_sentence(starters: Sequence[str], tokenize: Callable[[str], list[str]]
                    ) -> Callable[[str], bool] | None:
    """Whether a word (whitespace-delimited, as it stands in a text) is a starter, by the run's
    own tokenizer: all its tokens, less trailing punctuation (`_key`); None without
    starters."""
    if not starters:
        return None
    known, seen = frozenset(starters), {}

    def starts(word: str) -> bool:
        if word not in seen:
            if len(seen) > 1 << 16:  # a server's: bounded
                seen.clear()
            tokens = tokenize(word) if word[:1].isupper() else []
            seen[word] = bool(tokens) and _key(tokens) in known
        return seen[word]
    return starts
