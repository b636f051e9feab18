"""Terminology learned at training time, as Dinu et al. (ACL 2019) teach it: a glossary's terms
written into the source, so that the model learns to copy the target term it is given.

Each occurrence of a source term is followed by its target term, the three between reserved
marker tokens (the target term in the target tokenizer's tokens):

    ein <term> Mann <as> guy </term> steht          (glossary entry: Mann -> guy)

At training time (data.terminology) an occurrence may be annotated when its target term occurs
in the pair's target as whole tokens (so the annotation is what the reference does; a source
term given several targets, as a training lexicon may, takes the first the target holds), and
each is, with probability data.terminology.prob, drawn anew each epoch: a pure function of
(train.seed, epoch) and the corpus, so a resumed run annotates what the straight one did. A
line that annotation would take over data.max_len tokens is left as it is. At translation time
(decode.glossary_mode annotate or both) every occurrence is annotated, by the same function.
Occurrences are found as mt.glossary finds active entries: whole tokens, longest first.

Annotation happens as batches are collated (mt.mixing), from the token cache's ids: the cache
holds the corpus as it is, whatever the glossary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from mt.data import ParallelData
from mt.glossary import Glossary, TermIndex, occurrences
from mt.tokenizers import Tokenizer
from mt.vocab import Vocab

MARKERS = ("<term>", "<as>", "</term>")  # reserved in the source vocabulary
T = TypeVar("T")


def annotate(tokens: Sequence[T], spans: Sequence[tuple[int, int, int]],
             targets: Sequence[Sequence[T]], markers: Sequence[T]) -> list[T]:
    """tokens (strings or ids) with each span (start, stop, entry), in line order, followed by
    its entry's target term, the three between the markers (open, separator, close)."""
    out, at = [], 0
    for start, stop, e in spans:
        out += [*tokens[at:start], markers[0], *tokens[start:stop], markers[1], *targets[e],
                markers[2]]
        at = stop
    return out + list(tokens[at:])


def reserved_tokens(glossary: Glossary, tgt_tok: Tokenizer) -> list[str]:
    """What a run trained with this glossary adds to its source vocabulary: the markers and the
    target terms' tokens (which annotation puts in the source)."""
    terms = tgt_tok.tokenize_many([t for _, t in glossary.entries])
    return list(dict.fromkeys([*MARKERS, *(tok for term in terms for tok in term)]))


@dataclass
class Occurrences:
    """Where a corpus (one segmentation) may be annotated, flat, in (pair, start) order."""

    pair: np.ndarray  # (M,) the pair's index in the corpus
    start: np.ndarray  # (M,) the source term's first token
    stop: np.ndarray  # (M,) and the token after its last
    entry: np.ndarray  # (M,) the glossary entry


class Terminology:
    """A glossary as training annotates it (data.terminology), in a run's source ids."""

    def __init__(self, glossary: Glossary, prob: float, src_tok: Tokenizer,
                 tgt_tok: Tokenizer, src_vocab: Vocab):
        self.glossary, self.prob = glossary, prob
        self.sources = src_tok.tokenize_many([s for s, _ in glossary.entries])
        by_term: dict[tuple[str, ...], list[int]] = {}
        for e, term in enumerate(self.sources):
            by_term.setdefault(tuple(term), []).append(e)
        # each distinct source term's entries, in glossary order (a lexicon's alternatives)
        self.alternatives = list(by_term.values())
        self.target_tokens = tgt_tok.tokenize_many([t for _, t in glossary.entries])
        self.targets = [src_vocab.encode(t) for t in self.target_tokens]  # run source ids
        self.markers = src_vocab.encode(list(MARKERS))
        # tokens annotating an occurrence of each entry adds
        self.cost = np.array([len(t) + len(MARKERS) for t in self.targets], dtype=np.int64)

    def occurrences(self, data: ParallelData, src_vocab: Vocab, tgt_vocab: Vocab
                    ) -> Occurrences:
        """The occurrences of a corpus whose ids are those of these (its cache entry's)
        vocabularies: a source term in the source whose target term the target holds."""
        def ids(terms: list[list[str]], vocab: Vocab) -> list[tuple[int, ...]]:
            return [tuple(vocab.stoi[t] for t in term) if all(t in vocab.stoi for t in term)
                    else () for term in terms]  # a token the corpus lacks: never occurs

        index = TermIndex(ids([self.sources[a[0]] for a in self.alternatives], src_vocab))
        tgt_terms = ids(self.target_tokens, tgt_vocab)
        firsts = np.fromiter(index.by_first, dtype=np.int64)
        at = np.flatnonzero(np.isin(data.src.ids, firsts))
        lines = np.unique(np.searchsorted(data.src.offsets, at, side="right") - 1)
        found = []
        for i in lines.tolist():  # only the lines where some term may start
            tgt = data.tgt[i]
            for start, stop, k in index.find(data.src[i]):
                held = (e for e in self.alternatives[k]
                        if tgt_terms[e] and occurrences(tgt, tgt_terms[e]))
                if (e := next(held, None)) is not None:
                    found.append((i, start, stop, e))
        return Occurrences(*np.array(found, dtype=np.int64).reshape(-1, 4).T)

    def chosen(self, occ: Occurrences, src_lens: np.ndarray, max_len: int, key: tuple
               ) -> dict[int, list[tuple[int, int, int]]]:
        """The occurrences an epoch annotates, by pair: each with probability prob, drawn from
        key (seed, epoch, corpus, segmentation); none in a pair that they would take over
        max_len source tokens (src_lens: each pair's, before annotation)."""
        rng = np.random.default_rng((*key, len(MARKERS)))
        keep = rng.random(len(occ.pair)) < self.prob
        pair, entry = occ.pair[keep], occ.entry[keep]
        added = np.bincount(pair, self.cost[entry], minlength=len(src_lens))
        keep[keep] = src_lens[pair] + added[pair] <= max_len
        out: dict[int, list[tuple[int, int, int]]] = {}
        for i, start, stop, e in zip(*(a[keep].tolist() for a in (occ.pair, occ.start,
                                                                   occ.stop, occ.entry))):
            out.setdefault(i, []).append((start, stop, e))
        return out

    def added(self, chosen: dict[int, list[tuple[int, int, int]]], n: int) -> np.ndarray:
        """(n,) the tokens annotation adds to each pair."""
        out = np.zeros(n, dtype=np.int64)
        for i, spans in chosen.items():
            out[i] = sum(int(self.cost[e]) for _, _, e in spans)
        return out

    def annotate(self, ids: list[int], spans: list[tuple[int, int, int]]) -> list[int]:
        """A source line in run ids, annotated at these spans."""
        return annotate(ids, spans, self.targets, self.markers)
