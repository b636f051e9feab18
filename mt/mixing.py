"""Several training corpora as one: each epoch draws from each corpus by its weight.

A corpus of n pairs (after the length filter) and weight w gives round(w * n) pairs to each
epoch: weight 1 is the corpus once, 2 each pair twice, 0.5 half of it (another half the next
epoch). The pairs drawn from a corpus walk through one seeded permutation of it after another,
so every pair is drawn as often as any other, give or take one. What an epoch draws, and its
batches, are a pure function of (seed, epoch): a resumed run continues exactly. docs/data.md
says this for users.

Each corpus keeps its own token-cache entry and vocabulary (mt.token_cache; mt.cached_mix makes
the Parts of the entries); its ids are looked up in the run's vocabulary as a batch is
collated, its tag (if any) put first in each source, with data.terminology the glossary
terms the epoch annotates written in (mt.terminology; the plan counts their tokens unless
data.terminology.plain_batches), and with data.memory the memory matches the epoch draws
appended (mt.fuzzy_repair; counted by the plan).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch

from mt.buckets import plan_bucketed, widen
from mt.data import Batch, Batched, BatchPlan, ParallelData, pad, plan_batches
from mt.fuzzy_repair import FuzzyRepair, Repairs
from mt.terminology import Occurrences, Terminology
from mt.vocab import BOS, PAD


@dataclass
class Part:
    """One corpus: its pairs (one ParallelData per cached segmentation), weight and tag."""

    name: str
    variants: list[ParallelData]
    weight: float = 1.0
    tag: int | None = None  # the tag's id in the run's source vocabulary
    remap: tuple[np.ndarray | None, np.ndarray | None] = (None, None)  # entry id -> run id
    terms: list[Occurrences] | None = None  # per variant, with data.terminology
    repairs: Repairs | None = None  # each pair's memory match, with data.memory

    def drawn(self, variant: int = 0) -> int:
        """Pairs each epoch draws from this corpus."""
        return round(self.weight * len(self.variants[variant]))


class MixedData(Batched):
    """The training pairs of several corpora (or one), planned as one set of batches.

    A pair's global id is variant * size + (its corpus's base) + (its index in the corpus).
    """

    def __init__(self, parts: list[Part], buckets: bool = False,
                 terminology: Terminology | None = None, counted: bool = True,
                 repair: FuzzyRepair | None = None):
        self.parts, self.buckets = parts, buckets  # buckets: plan and collate by mt.buckets
        self.terminology = terminology  # its Parts' terms are annotated
        self.counted = counted  # the plan counts the annotations' tokens (else they ride on top)
        self.repair = repair  # its Parts' repairs are appended (data.memory)
        self._repaired: list[np.ndarray | None] = [None for _ in parts]  # the planned epoch's
        self.max_len = np.iinfo(np.int64).max  # annotation keeps sources within (filter_length)
        self._chosen: list[dict] = [{} for _ in parts]  # the planned epoch's annotations, by part
        self.start = BOS  # the decoder's first input (mt.vocab.start_id)
        n_variants = {len(p.variants) for p in parts}
        assert len(n_variants) == 1, "every corpus has the same number of segmentations"
        self.n_variants = n_variants.pop()
        sizes = [len(p.variants[0].src) for p in parts]
        self.bases = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.size = int(self.bases[-1])
        self._lens = [self._lengths(v) for v in range(self.n_variants)]
        self._plan: tuple[tuple, BatchPlan] | None = None

    def _lengths(self, v: int) -> tuple[np.ndarray, np.ndarray]:
        """Every pair's (source, target) length in segmentation v, the tag counted."""
        src = np.concatenate([p.variants[v].src_lens + (p.tag is not None) for p in self.parts])
        tgt = np.concatenate([p.variants[v].tgt_lens for p in self.parts])
        return src, tgt

    def __len__(self) -> int:
        """Pairs an epoch draws (of the first segmentation)."""
        return sum(p.drawn() for p in self.parts)

    def mask_repairs(self, translations: Callable[[int], Iterable[int]]) -> None:
        """data.memory.mask: each corpus's match targets masked against its pairs' sources
        (their first segmentation, in run ids) with a lexicon of run ids (mt.fuzzy_repair)."""
        for part in self.parts:
            if part.repairs is not None:
                source = functools.partial(_run_source, part.variants[0], part.remap[0])
                part.repairs = part.repairs.masked(source, translations, self.repair.gap)

    def filter_length(self, max_len: int) -> list[int]:
        """Drop empty and over-long pairs of every corpus and segmentation; the count dropped
        from each corpus (of its first segmentation)."""
        self.max_len = max_len
        dropped = [[v.filter_length(max_len) for v in p.variants] for p in self.parts]
        return [counts[0] for counts in dropped]

    def plan(self, max_tokens: int, seed: int | None = None, epoch: int = 0) -> BatchPlan:
        """Epoch `epoch`'s batches (see plan_batches) of the pairs it draws: global ids."""
        key = (max_tokens, seed, epoch)
        if self._plan is None or self._plan[0] != key:
            v = epoch % self.n_variants
            chosen = np.concatenate([v * self.size + self.bases[i] + self._draw(i, v, seed, epoch)
                                     for i in range(len(self.parts))])
            src, tgt = self._lens[v]
            added = np.zeros_like(src)
            if self.terminology is not None:
                added = self._annotations(v, seed, epoch)
                if self.counted:
                    src = src + added
            if self.repair is not None:
                src = src + self._repairs(v, seed, epoch, added)
            local = chosen - v * self.size
            planner = plan_bucketed if self.buckets else plan_batches
            p = planner(src[local], tgt[local], max_tokens, None if seed is None else seed + epoch)
            self._plan = key, BatchPlan(chosen[p.pairs], p.bounds)
        return self._plan[1]

    def _annotations(self, v: int, seed: int | None, epoch: int) -> np.ndarray:
        """Choose the epoch's annotations (segmentation v); the tokens they add to each pair."""
        added = []
        for i, part in enumerate(self.parts):
            data = part.variants[v]
            self._chosen[i] = self.terminology.chosen(part.terms[v], data.src_lens, self.max_len,
                                                      (seed or 0, epoch, i, v))
            added.append(self.terminology.added(self._chosen[i], len(data.src_lens)))
        return np.concatenate(added)

    def _repairs(self, v: int, seed: int | None, epoch: int, annotated: np.ndarray
                 ) -> np.ndarray:
        """Choose the pairs the epoch augments with their match (segmentation v; annotated:
        the tokens terminology adds to each, which count toward data.max_len); the tokens
        that adds to each pair."""
        added = []
        for i, part in enumerate(self.parts):
            lens = part.variants[v].src_lens + annotated[self.bases[i]:self.bases[i + 1]]
            self._repaired[i] = self.repair.chosen(part.repairs, (seed or 0, epoch, i, v), lens,
                                                   self.max_len)
            added.append(np.where(self._repaired[i], part.repairs.cost, 0))
        return np.concatenate(added)

    def _draw(self, i: int, v: int, seed: int | None, epoch: int) -> np.ndarray:
        """Corpus i's pairs in epoch `epoch`: positions [epoch * c, (epoch + 1) * c) of an
        endless walk through seeded permutations of its pairs (c: Part.drawn)."""
        part = self.parts[i]
        pairs, c = part.variants[v].pairs, part.drawn(v)
        n = len(pairs)
        if c == n or not n:  # all of it, once: plan_batches shuffles
            return pairs
        start, stop = epoch * c, (epoch + 1) * c
        walk = [np.random.default_rng((seed or 0, i, v, cycle)).permutation(n)
                for cycle in range(start // n, (stop - 1) // n + 1)]
        return pairs[np.concatenate(walk)[start - (start // n) * n:][:c]]

    def collate(self, pairs: np.ndarray) -> Batch:
        pairs = np.asarray(pairs, dtype=np.int64)
        v, local = pairs // self.size, pairs % self.size
        which = np.searchsorted(self.bases, local, side="right") - 1
        pieces = []
        for i in np.unique(which):
            part, rows = self.parts[i], np.flatnonzero(which == i)
            data, tgt_map = part.variants[int(v[0])], part.remap[1]
            ids = local[rows] - self.bases[i]
            pieces.append((rows, self._sources(i, data, ids),
                           data.tgt.padded(ids, first=self.start, remap=tgt_map),
                           data.tgt.padded(ids, eos=True, remap=tgt_map),
                           int(data.tgt_lens[ids].sum())))
        n_tgt = sum(piece[4] for piece in pieces) + len(pairs)
        if len(pieces) == 1:
            batch = Batch(*pieces[0][1:4], n_tgt)
        else:
            batch = Batch(*(_stack([(rows, piece[k]) for rows, *piece in pieces], len(pairs))
                            for k in range(3)), n_tgt)
        return widen(batch) if self.buckets else batch

    def _sources(self, i: int, data: ParallelData, ids: np.ndarray) -> torch.Tensor:
        """(b, S) the sources of corpus i's pairs ids, in run ids: its tag first, annotated
        where the planned epoch chose to."""
        part, chosen, repaired = self.parts[i], self._chosen[i], self._repaired[i]
        src_map = part.remap[0]
        if not any(int(j) in chosen for j in ids) and (repaired is None
                                                       or not repaired[ids].any()):
            return data.src.padded(ids, first=part.tag, remap=src_map)
        lead = [] if part.tag is None else [part.tag]
        lines = (data.src[j] if src_map is None else src_map[data.src[j]].tolist() for j in ids)
        out = []
        for j, line in zip(ids.tolist(), lines):
            if j in chosen:
                line = self.terminology.annotate(line, chosen[j])
            if repaired is not None and repaired[j]:
                line = self.repair.augment(list(line), part.repairs.targets[j])
            out.append(lead + list(line))
        return pad(out)


def _run_source(data: ParallelData, src_map: np.ndarray | None, j: int) -> list[int]:
    """Pair j's source (its index in data, every pair counted) in run ids."""
    return list(data.src[j]) if src_map is None else src_map[data.src[j]].tolist()


def _stack(pieces: list[tuple[np.ndarray, torch.Tensor]], n: int) -> torch.Tensor:
    """Rows of several padded (b, L) tensors into one (n, max L), each at its rows."""
    out = torch.full((n, max(t.shape[1] for _, t in pieces)), PAD, dtype=torch.long)
    for rows, t in pieces:
        out[torch.from_numpy(rows), :t.shape[1]] = t
    return out
