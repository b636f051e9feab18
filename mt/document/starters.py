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


def learn(entries: Sequence, share: float = SHARE, least: int = LEAST) -> list[str]:
    """The starters of the source side of token cache entries (mt.token_cache.entry), most
    frequent first: tokens beginning with a capital letter (after SentencePiece's word mark)
    that begin at least `least` lines and whose occurrences begin a line at least `share` of
    the time."""
    first: collections.Counter = collections.Counter()
    total: collections.Counter = collections.Counter()
    for entry in entries:
        array = entry.data().src
        ids, offsets = np.asarray(array.ids), np.asarray(array.offsets)
        starts = offsets[:-1][offsets[1:] > offsets[:-1]]  # not an empty line's
        counts = np.bincount(ids[starts].astype(np.int64), minlength=len(entry.src_vocab))
        every = entry.counts("src")
        for i in np.flatnonzero(counts >= 1):
            token = entry.src_vocab.itos[i]
            if token.lstrip("\u2581")[:1].isupper():
                first[token] += int(counts[i])
                total[token] += every[token]
    found = [t for t, n in first.items() if n >= least and n >= share * total[t]]
    return sorted(found, key=lambda t: (-first[t], t))[:MAX_STARTERS]


def starts_sentence(starters: Sequence[str], tokenize: Callable[[str], list[str]]
                    ) -> Callable[[str], bool] | None:
    """Whether a word (whitespace-delimited, as it stands in a text) begins with a starter, by
    the run's own tokenizer; None without starters."""
    if not starters:
        return None
    known, seen = frozenset(starters), {}

    def starts(word: str) -> bool:
        if word not in seen:
            if len(seen) > 1 << 16:  # a server's: bounded
                seen.clear()
            tokens = tokenize(word) if word[:1].isupper() else []
            seen[word] = bool(tokens) and tokens[0] in known
        return seen[word]
    return starts
