"""Training corpora with their files found, encoded pairs as flat id arrays, and length-bucketed
token-budget batches planned from the lengths alone and collated as they are consumed."""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch

from mt.config import CorpusConfig, DataConfig, corpus_configs, split_config
from mt.corpus_formats import CorpusSource, corpus_format
from mt.tokenizers import Tokenizer
from mt.vocab import BOS, EOS, PAD, Vocab

T = TypeVar("T")


def corpus_source(c: CorpusConfig, d: DataConfig) -> CorpusSource:
    """Corpus c of d's config with its files found."""
    langs = (d.src_lang, d.tgt_lang)
    return CorpusSource(c.name, c.format, corpus_format(c.format).paths(c, d.dir, langs),
                        langs, c.weight, c.tag)


def corpus_sources(d: DataConfig) -> list[CorpusSource]:
    """data.train's corpora with their files found, in the config's order."""
    return [corpus_source(c, d) for c in corpus_configs(d)]


def split_source(d: DataConfig, split: str) -> CorpusSource:
    """data.val or data.test (split: "val" or "test") with its files found."""
    return corpus_source(split_config(d, split), d)


def read_pairs(source: CorpusSource) -> tuple[list[str], list[str]]:
    """A held-out set's sources and targets, in memory (they are small)."""
    pairs = list(source.pairs())
    return [s for s, _ in pairs], [t for _, t in pairs]


def read_parallel(src_path: Path, tgt_path: Path) -> tuple[list[str], list[str]]:
    return read_pairs(CorpusSource(str(src_path), "plain", (src_path, tgt_path)))


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) source ids, PAD-padded
    tgt_in: torch.Tensor  # (B, T) <bos> y1 .. yn
    tgt_out: torch.Tensor  # (B, T) y1 .. yn <eos>
    n_tgt_tokens: int  # non-pad target tokens: the loss normalizer

    def to(self, device: torch.device) -> Batch:
        move = lambda t: t.to(device, non_blocking=True)  # noqa: E731
        return Batch(move(self.src), move(self.tgt_in), move(self.tgt_out), self.n_tgt_tokens)

    def pin_memory(self) -> Batch:
        """In page-locked memory, so `to(cuda)` copies while the GPU runs the previous step."""
        return Batch(self.src.pin_memory(), self.tgt_in.pin_memory(), self.tgt_out.pin_memory(),
                     self.n_tgt_tokens)


def pad(seqs: list[list[int]], value: int = PAD) -> torch.Tensor:
    width = max((len(s) for s in seqs), default=0)
    out = torch.full((len(seqs), max(width, 1)), value, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out


@dataclass
class TokenArray:
    """Id sequences stored back to back: in memory, or memory-mapped from the token cache."""

    ids: np.ndarray  # (N_tokens,) every sequence's ids, one after another
    offsets: np.ndarray  # (N + 1,) int64: sequence i is ids[offsets[i]:offsets[i + 1]]

    @classmethod
    def from_lists(cls, seqs: Sequence[Sequence[int]]) -> TokenArray:
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in seqs], out=offsets[1:])
        ids = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int32, count=offsets[-1])
        return cls(ids, offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> list[int]:
        return self.ids[self.offsets[i]:self.offsets[i + 1]].tolist()

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets).astype(np.int32)

    def padded(self, rows: np.ndarray, eos: bool = False, first: int | None = None,
               remap: np.ndarray | None = None) -> torch.Tensor:
        """Sequences `rows` as a (B, L) PAD-padded tensor; the id `first` (say the decoder's
        start) first and <eos> last if asked; ids looked up in `remap` when given."""
        rows = np.asarray(rows, dtype=np.int64)
        starts = self.offsets[rows]
        lens = self.offsets[rows + 1] - starts
        lead = int(first is not None)
        out = np.full((len(rows), max(int(lens.max(initial=0)) + lead + eos, 1)), PAD,
                      dtype=np.int64)
        within = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)  # position in row
        ids = self.ids[np.repeat(starts, lens) + within]
        out[np.repeat(np.arange(len(rows)), lens), within + lead] = (
            ids if remap is None else remap[ids])
        if lead:
            out[:, 0] = first
        if eos:
            out[np.arange(len(rows)), lens + lead] = EOS
        return torch.from_numpy(out)


def group_bounds(src_sizes: np.ndarray, tgt_sizes: np.ndarray, max_tokens: int) -> np.ndarray:
    """Greedily cut a length-sorted sequence of items into runs that fit a token budget.

    A run's padded size is its item count x (largest source size + largest target size); it
    takes items while that fits `max_tokens` (one item that does not fit is a run on its own).
    Returns the runs' boundaries: run k is items b[k]:b[k + 1].
    """
    src = np.asarray(src_sizes, dtype=np.int64)
    tgt = np.asarray(tgt_sizes, dtype=np.int64)
    cuts, start, n = [0], 0, len(src)
    while start < n:
        # The padded size only grows as a run grows, so the first item over budget ends it; it
        # lies at most max_tokens / (first item's size) + 1 items away.
        first = int(src[start] + tgt[start])
        stop = n if first == 0 else min(n, start + max_tokens // first + 2)
        padded = np.arange(1, stop - start + 1) * (np.maximum.accumulate(src[start:stop])
                                                   + np.maximum.accumulate(tgt[start:stop]))
        over = np.flatnonzero(padded[1:] > max_tokens)
        start += int(over[0]) + 1 if len(over) else stop - start
        cuts.append(start)
    return np.array(cuts, dtype=np.int64)


@dataclass
class BatchPlan:
    """An epoch's batches as pair indices: batch k is pairs[bounds[k]:bounds[k + 1]]."""

    pairs: np.ndarray  # (N,) int64 pair indices, batch after batch
    bounds: np.ndarray  # (n_batches + 1,) int64

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def __getitem__(self, k: int) -> np.ndarray:
        return self.pairs[self.bounds[k]:self.bounds[k + 1]]


def plan_batches(src_lens: np.ndarray, tgt_lens: np.ndarray, max_tokens: int,
                 seed: int | None = None) -> BatchPlan:
    """Token-budget batches of similar-length pairs; shuffled when a seed is given.

    A batch holds as many pairs as fit `max_tokens` padded (source + target) tokens. Pairs are
    sorted by length inside pools of ~100 batches, so padding is small while the order still
    varies from epoch to epoch. A pure function of its arguments: resume depends on it.
    """
    rng = np.random.default_rng(seed)
    n = len(src_lens)
    order = rng.permutation(n) if seed is not None else np.arange(n)
    pool = max(1, 100 * max_tokens // 40)
    pieces, bounds = [], [np.zeros(1, dtype=np.int64)]
    for start in range(0, n, pool):
        chunk = order[start:start + pool]
        chunk = chunk[np.lexsort((tgt_lens[chunk], src_lens[chunk]))]  # stable: ties stay shuffled
        pieces.append(chunk)
        bounds.append(start + group_bounds(src_lens[chunk], tgt_lens[chunk] + 1, max_tokens)[1:])
    plan = BatchPlan(np.concatenate(pieces) if pieces else order, np.concatenate(bounds))
    return shuffle_batches(plan, rng) if seed is not None else plan


def shuffle_batches(plan: BatchPlan, rng: np.random.Generator) -> BatchPlan:
    sizes = np.diff(plan.bounds)
    perm = rng.permutation(len(sizes))
    bounds = np.zeros_like(plan.bounds)
    np.cumsum(sizes[perm], out=bounds[1:])
    # Each pair's new place minus its old one is constant within a batch.
    moved = np.repeat(plan.bounds[:-1][perm] - bounds[:-1], sizes[perm])
    return BatchPlan(plan.pairs[moved + np.arange(len(plan.pairs))], bounds)


class Batched:
    """What a set of pairs that plans and collates its batches offers besides."""

    def plan(self, max_tokens: int, seed: int | None = None) -> BatchPlan:
        raise NotImplementedError

    def collate(self, pairs: np.ndarray) -> Batch:
        raise NotImplementedError

    def batches(self, max_tokens: int, seed: int | None = None) -> list[Batch]:
        """Every batch of plan(max_tokens, seed), collated now: for small sets."""
        plan = self.plan(max_tokens, seed)
        return [self.collate(plan[k]) for k in range(len(plan))]

    def loader(self, plan: BatchPlan, positions: Iterable[int], pin_memory: bool = False
               ) -> Iterator[Batch]:
        """Batches plan[k] for k in positions, collated in a background thread a few ahead."""
        def make(k: int) -> Batch:
            batch = self.collate(plan[k])
            return batch.pin_memory() if pin_memory else batch

        return prefetch(map(make, positions))


class ParallelData(Batched):
    """Encoded sentence pairs (source ids; target ids without <bos>/<eos>). Batches' targets
    start with `start`, the decoder's first input (mt.vocab.start_id).

    Held in memory (validation, tests) or memory-mapped from the token cache (training, see
    mt.token_cache); either way batches are planned from the lengths alone and collated on demand.
    """

    def __init__(self, src: TokenArray, tgt: TokenArray):
        self.src, self.tgt = src, tgt
        self.start = BOS
        self.src_lens, self.tgt_lens = src.lengths(), tgt.lengths()
        self.pairs = np.arange(len(src))  # the pairs in use: filter_length drops some
        self._plan: tuple[tuple, BatchPlan] | None = None  # the latest plan, asked for again

    @classmethod
    def from_lists(cls, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]]
                   ) -> ParallelData:
        return cls(TokenArray.from_lists(src), TokenArray.from_lists(tgt))

    @classmethod
    def from_text(cls, src_lines: list[str], tgt_lines: list[str], src_tok: Tokenizer,
                  tgt_tok: Tokenizer, src_vocab: Vocab, tgt_vocab: Vocab) -> ParallelData:
        src = [src_vocab.encode(t) for t in src_tok.tokenize_many(src_lines)]
        tgt = [tgt_vocab.encode(t) for t in tgt_tok.tokenize_many(tgt_lines)]
        return cls.from_lists(src, tgt)

    def __len__(self) -> int:
        return len(self.pairs)

    def pair(self, i: int) -> tuple[list[int], list[int]]:
        """The i-th pair in use, as id lists."""
        return self.src[self.pairs[i]], self.tgt[self.pairs[i]]

    def filter_length(self, max_len: int) -> int:
        """Drop empty pairs and pairs longer than max_len tokens on either side; return how many."""
        s, t = self.src_lens[self.pairs], self.tgt_lens[self.pairs]
        keep = (s > 0) & (s <= max_len) & (t > 0) & (t <= max_len)
        dropped = len(self.pairs) - int(keep.sum())
        self.pairs = self.pairs[keep]
        self._plan = None
        return dropped

    def plan(self, max_tokens: int, seed: int | None = None) -> BatchPlan:
        """The batches of one epoch as pair indices (see plan_batches); nothing is collated."""
        key = (max_tokens, seed, len(self.pairs))
        if self._plan is None or self._plan[0] != key:
            p = plan_batches(self.src_lens[self.pairs], self.tgt_lens[self.pairs], max_tokens,
                             seed)
            self._plan = key, BatchPlan(self.pairs[p.pairs], p.bounds)
        return self._plan[1]

    def collate(self, pairs: np.ndarray) -> Batch:
        src = self.src.padded(pairs)
        tgt_in = self.tgt.padded(pairs, first=self.start)
        tgt_out = self.tgt.padded(pairs, eos=True)
        return Batch(src, tgt_in, tgt_out, int(self.tgt_lens[pairs].sum()) + len(pairs))



def prefetch(items: Iterable[T], ahead: int = 4) -> Iterator[T]:
    """Iterate `items` in a background thread, up to `ahead` items before the consumer.

    Errors in the thread are raised in the consumer; the thread stops when the consumer does.
    """
    q: queue.Queue = queue.Queue(maxsize=ahead)
    stop, end = threading.Event(), object()

    def put(entry: tuple) -> bool:
        while not stop.is_set():
            try:
                q.put(entry, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def work() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
        except BaseException as e:  # handed to the consumer, raised there
            put((None, e))
            return
        put((end, None))

    thread = threading.Thread(target=work, daemon=True, name="mt-prefetch")
    thread.start()
    try:
        while True:
            item, error = q.get()
            if error is not None:
                raise error
            if item is end:
                return
            yield item
    finally:
        stop.set()
        # Wait for the item in hand (one collate at most): a daemon thread still inside torch when
        # the interpreter exits is unwound mid-C++ and aborts the process ("terminate called
        # without an active exception"), after a run that had otherwise ended well.
        thread.join()
