"""Neural fuzzy repair (Bulte & Tezcan, ACL 2019; Xu, Crego & Senellart, ACL 2020): a source
followed by the target of its best translation-memory match, after a reserved marker, so that
the model learns when to copy from the match and when not:

    Save the file as <tm> Datei speichern unter          (match: "Save the file" 75%)

The match's target is in the target tokenizer's tokens, looked up in the source vocabulary
(a run trained with data.memory has the target's tokens there: cached_mix.run_vocabs). At
training time (data.memory) each pair's best match among the others (mt.memory.training),
computed once and cached, is appended when it scores at least data.memory.threshold, with
probability data.memory.prob drawn anew each epoch: a pure function of (train.seed, epoch)
and the corpus, so a resumed run augments what the straight one did. A line the match would
take over data.max_len tokens is left plain. At translation time (decode.memory) each line
whose best match scores at least the run's threshold is augmented by the same function.

With data.memory.mask (Xu, Crego & Senellart's FM*), the match's target shows where to repair:
the words that translate the match's source tokens the input lacks are masked, a run of them
one GAP:

    Save the document <tm> <tm-gap> speichern             (match: "Save the file" 75%)

A match-source token the input lacks (counted: one "the" for each the input has fewer of)
masks the first unmasked target token among its translations, the first mt.config.RELATED
of its lexical shortlist row (mt.shortlist: Dice of co-occurrence in the run's training
pairs), and with it the rest of that token's word (a subword piece masks its whole word).
Training masks with the very table it puts in its checkpoints, so translating reads the same
rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from mt.config import RELATED
from mt.decoding.align import token_words
from mt.shortlist import Shortlist
from mt.tokenizers import Tokenizer
from mt.vocab import Vocab

MARKER = "<tm>"  # reserved in the source vocabulary: what follows is the match's target
GAP = "<tm-gap>"  # reserved with data.memory.mask: masked tokens of the match's target
T = TypeVar("T")


def lexicon(table: Shortlist) -> Callable[[int], list[int]]:
    """The lexicon masking reads: each source id's first RELATED target ids of its row."""
    return lambda s: table.row(s)[:RELATED]


def augment(tokens: Sequence[T], match: Sequence[T], marker: T) -> list[T]:
    """tokens (strings or ids) followed by the marker and the match's target."""
    return [*tokens, marker, *match]


def unrelated(source: Sequence[T], match_source: Sequence[T], match_target: Sequence[T],
              translations: Callable[[T], Iterable[T]]) -> set[int]:
    """The positions of match_target to mask: for each token of match_source that source
    lacks (as multisets), in order, the first unmasked target token among its translations
    (none where the target has none)."""
    have = Counter(source)
    masked: set[int] = set()
    for token in match_source:
        if have[token] > 0:
            have[token] -= 1
            continue
        likely = set(translations(token))
        at = next((p for p, t in enumerate(match_target) if p not in masked and t in likely),
                  None)
        if at is not None:
            masked.add(at)
    return masked


def masked(tokens: Sequence[T], positions: set[int], gap: T,
           words: Sequence[int] | None = None) -> list[T]:
    """tokens with those at positions replaced, a run of them by one gap; given each token's
    word (mt.decoding.align.token_words), every token of a word one of them is in too."""
    if words is not None:
        hit = {words[p] for p in positions}
        positions = {p for p, w in enumerate(words) if w in hit}
    out: list[T] = []
    for p, t in enumerate(tokens):
        if p not in positions:
            out.append(t)
        elif p - 1 not in positions:
            out.append(gap)
    return out


def chosen(key: tuple, prob: float, has_match: np.ndarray, cost: np.ndarray,
           src_lens: np.ndarray, max_len: int) -> np.ndarray:
    """(N,) which pairs an epoch augments: those with a match (has_match), each with
    probability prob drawn from key (seed, epoch, corpus, segmentation), none whose source it
    would take over max_len tokens (cost: the tokens augmenting adds to each pair)."""
    rng = np.random.default_rng((*key, 7))  # 7: apart from data.terminology's draws
    return (rng.random(len(has_match)) < prob) & has_match & (src_lens + cost <= max_len)


@dataclass
class Repairs:
    """A corpus's matches as training appends them (one segmentation's pair indices)."""

    targets: list[list[int]]  # per pair, its match's target in run source ids; [] for none
    # with data.memory.mask, per pair: its match's source in run source ids, and the word of
    # each target token (mt.decoding.align.token_words)
    sources: list[list[int]] | None = None
    words: list[list[int]] | None = None

    def __post_init__(self):
        # (N,) the tokens augmenting each pair adds: the marker and the target; 0 for none
        self.cost = np.array([len(t) + 1 if t else 0 for t in self.targets], dtype=np.int64)

    def masked(self, pair_sources: Callable[[int], Sequence[int]],
               translations: Callable[[int], Iterable[int]], gap: int) -> Repairs:
        """These repairs with each target masked against its pair's source (pair_sources(i):
        pair i's, in run ids) by unrelated, whole words."""
        return Repairs([masked(t, unrelated(pair_sources(i), s, t, translations), gap, w)
                        if t else [] for i, (t, s, w) in
                        enumerate(zip(self.targets, self.sources, self.words))])


@dataclass
class FuzzyRepair:
    """data.memory as training applies it, in a run's source ids."""

    prob: float
    marker: int  # MARKER's id
    gap: int | None = None  # GAP's id, with data.memory.mask

    def chosen(self, repairs: Repairs, key: tuple, src_lens: np.ndarray, max_len: int
               ) -> np.ndarray:
        """(N,) the pairs of a corpus an epoch augments (see chosen)."""
        return chosen(key, self.prob, repairs.cost > 0, repairs.cost, src_lens, max_len)

    def augment(self, ids: list[int], target: list[int]) -> list[int]:
        return augment(ids, target, self.marker)


def repairs_of(matches: Sequence[tuple[float, str, str] | None], tgt_tok: Tokenizer,
               src_vocab: Vocab, src_tok: Tokenizer | None = None) -> Repairs:
    """A corpus's cached matches (mt.token_cache.matches: score, target, source) in a run's
    source ids: each distinct target tokenized once, by the target tokenizer; with src_tok
    (data.memory.mask), each distinct match source too, by it, and the targets' words."""
    def tokenized(texts: Iterable[str], tok: Tokenizer) -> dict[str, list[str]]:
        texts = list(dict.fromkeys(texts))
        return dict(zip(texts, tok.tokenize_many(texts)))

    found = [m for m in matches if m is not None]
    targets = tokenized((m[1] for m in found), tgt_tok)
    ids = {t: src_vocab.encode(toks) for t, toks in targets.items()}
    if src_tok is None:
        return Repairs([[] if m is None else ids[m[1]] for m in matches])
    sources = {s: src_vocab.encode(toks)
               for s, toks in tokenized((m[2] for m in found), src_tok).items()}
    words = {t: token_words(toks, tgt_tok) for t, toks in targets.items()}
    return Repairs(*([[] if m is None else table[m[k]] for m in matches]
                     for k, table in ((1, ids), (2, sources), (1, words))))
