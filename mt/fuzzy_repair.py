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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from mt.tokenizers import Tokenizer
from mt.vocab import Vocab

MARKER = "<tm>"  # reserved in the source vocabulary: what follows is the match's target
T = TypeVar("T")


def augment(tokens: Sequence[T], match: Sequence[T], marker: T) -> list[T]:
    """tokens (strings or ids) followed by the marker and the match's target."""
    return [*tokens, marker, *match]


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

    def __post_init__(self):
        # (N,) the tokens augmenting each pair adds: the marker and the target; 0 for none
        self.cost = np.array([len(t) + 1 if t else 0 for t in self.targets], dtype=np.int64)


@dataclass
class FuzzyRepair:
    """data.memory as training applies it, in a run's source ids."""

    prob: float
    marker: int  # MARKER's id

    def chosen(self, repairs: Repairs, key: tuple, src_lens: np.ndarray, max_len: int
               ) -> np.ndarray:
        """(N,) the pairs of a corpus an epoch augments (see chosen)."""
        return chosen(key, self.prob, repairs.cost > 0, repairs.cost, src_lens, max_len)

    def augment(self, ids: list[int], target: list[int]) -> list[int]:
        return augment(ids, target, self.marker)


def repairs_of(matches: Sequence[tuple[float, str] | None], tgt_tok: Tokenizer,
               src_vocab: Vocab) -> Repairs:
    """A corpus's cached matches (mt.token_cache.matches) in a run's source ids: each distinct
    target tokenized once, by the target tokenizer."""
    texts = list(dict.fromkeys(m[1] for m in matches if m is not None))
    ids = dict(zip(texts, (src_vocab.encode(t) for t in tgt_tok.tokenize_many(texts))))
    return Repairs([[] if m is None else ids[m[1]] for m in matches])
