"""The lexical shortlist: for each source token the target tokens a translation of it is likely
to need, learned from the training pairs, so that decoding projects onto the union of a
batch's lists rather than the whole target vocabulary (Marian's `--shortlist`, CTranslate2's
vocabulary map; docs/decoding.md#shortlist).

The table is each source token's `k` best target tokens by the Dice coefficient of their
co-occurrence in sentence pairs, 2 c(s, t) / (c(s) + c(t)), c counting the pairs that hold a
token (or both), plus the `frequent` most frequent target tokens, always listed. Dice rather
than p(t | s): p(t | s) ranks the target words that occur everywhere ("the", ".") first for
every source word, and those the frequent list holds already; Dice divides by how common the
target is, so a source word's own translation comes first, and it needs no aligner (Marian's
lists come from fast_align's, a tool mt does not have). Counting is vectorized over chunks of
pairs, and at most MAX_PAIRS pairs, evenly spaced, are counted: the best few targets of a
word that matters are settled long before that.

Stored in a checkpoint as plain tensors (`to_state`), compressed sparse rows: `offsets`
(V_src + 1,) and `ids`, source token s's list being ids[offsets[s]:offsets[s + 1]], best first;
`from_state` checks them (a damaged table is a CheckpointError).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from mt.data import ParallelData
from mt.errors import CheckpointError
from mt.vocab import PAD, SPECIALS

MAX_PAIRS = 2_000_000  # pairs counted at most, evenly spaced over the corpora
CHUNK = 8192  # pairs counted at a time: their (source, target) token pairs fit in memory


@dataclass(frozen=True)
class Shortlist:
    """Each source token's likely target tokens (CSR) and the target tokens always listed."""

    offsets: torch.Tensor  # (V_src + 1,) int64, monotone, from 0 to len(ids)
    ids: torch.Tensor  # (nnz,) int64 target ids, each source token's best first
    frequent: torch.Tensor  # (N,) int64 target ids, most frequent first
    tgt_size: int  # V_tgt: every id is below it

    def row(self, s: int) -> list[int]:
        """Source token s's list, best first."""
        return self.ids[self.offsets[s]:self.offsets[s + 1]].tolist()

    def candidates(self, src: torch.Tensor) -> torch.Tensor:
        """src ids (any shape) -> the sorted target ids (V',) a translation of them may use:
        their lists, the frequent tokens and the special tokens (<unk>, <eos>, ...)."""
        sources = src.flatten().unique()
        sources = sources[(sources != PAD) & (sources < len(self.offsets) - 1)].cpu()
        starts = self.offsets[sources]
        lens = self.offsets[sources + 1] - starts
        first = torch.repeat_interleave(lens.cumsum(0) - lens, lens)  # each entry's row start
        at = torch.repeat_interleave(starts, lens) + torch.arange(int(lens.sum())) - first
        specials = torch.arange(len(SPECIALS))
        return torch.cat([self.ids[at], self.frequent, specials]).unique()

    def to_state(self) -> dict:
        """Plain tensors and ints, as a checkpoint holds them (weights_only loading)."""
        return {"offsets": self.offsets, "ids": self.ids, "frequent": self.frequent,
                "tgt_size": self.tgt_size}

    @classmethod
    def from_state(cls, state: object, src_size: int, tgt_size: int, where: object
                   ) -> Shortlist:
        """The table a checkpoint holds, checked against the run's vocabularies (sizes);
        CheckpointError naming `where` if it is damaged."""
        if not isinstance(state, dict):
            raise _damaged(where, f"a {type(state).__name__}, not a table")
        parts = [state.get(name) for name in ("offsets", "ids", "frequent")]
        if not all(isinstance(t, torch.Tensor) and t.dim() == 1 and not t.is_floating_point()
                   for t in parts):
            raise _damaged(where, "offsets, ids and frequent must be 1-D integer tensors")
        offsets, ids, frequent = (t.long() for t in parts)
        if state.get("tgt_size") != tgt_size:
            raise _damaged(where, f"made for {state.get('tgt_size')!r} target tokens, the "
                                  f"vocabulary has {tgt_size}")
        if len(offsets) != src_size + 1:
            raise _damaged(where, f"{len(offsets) - 1} source rows, the vocabulary has "
                                  f"{src_size}")
        if offsets[0] != 0 or offsets[-1] != len(ids) or (offsets.diff() < 0).any():
            raise _damaged(where, "its offsets are not monotone from 0 to the number of ids")
        for name, t in (("ids", ids), ("frequent", frequent)):
            if len(t) and (t.min() < 0 or t.max() >= tgt_size):
                raise _damaged(where, f"{name} outside the target vocabulary (0..{tgt_size - 1})")
        return cls(offsets, ids, frequent, tgt_size)


def _damaged(where: object, why: str) -> CheckpointError:
    return CheckpointError(f"{where}: damaged shortlist ({why}); build it again with "
                           "mt shortlist RUN")


Corpus = tuple[ParallelData, np.ndarray | None, np.ndarray | None]  # pairs, entry -> run ids


def learn(corpora: Iterable[Corpus], src_size: int, tgt_size: int, k: int, frequent: int
          ) -> Shortlist:
    """The shortlist of pairs in run ids: each corpus's ParallelData (its pairs in use) with
    the maps of its ids to the run's (None: the same), over vocabularies of these sizes."""
    corpora = list(corpora)
    total = sum(len(data) for data, _, _ in corpora)
    stride = max(1, -(-total // MAX_PAIRS))
    df_src, df_tgt = np.zeros(src_size, np.int64), np.zeros(tgt_size, np.int64)
    tf_tgt = np.zeros(tgt_size, np.int64)
    keys, counts = [], []
    for src, s_row, tgt, t_row, n in _chunks(corpora, stride):
        s_tok, s_row = _unique_per_row(src, s_row, src_size)
        t_tok, t_row = _unique_per_row(tgt, t_row, tgt_size)
        df_src += np.bincount(s_tok, minlength=src_size)
        df_tgt += np.bincount(t_tok, minlength=tgt_size)
        tf_tgt += np.bincount(tgt, minlength=tgt_size)
        key, count = np.unique(_pair_keys(s_tok, s_row, t_tok, t_row, n, tgt_size),
                               return_counts=True)
        keys.append(key)
        counts.append(count)
    key, where = np.unique(np.concatenate(keys or [np.zeros(0, np.int64)]), return_inverse=True)
    together = np.bincount(where, weights=np.concatenate(counts or [np.zeros(0)]))
    s, t = key // tgt_size, key % tgt_size
    dice = 2 * together / (df_src[s] + df_tgt[t])
    offsets, ids = _best(s, t, dice, src_size, k)
    common = np.argsort(-tf_tgt, kind="stable")[:frequent]
    return Shortlist(torch.from_numpy(offsets), torch.from_numpy(ids),
                     torch.from_numpy(common[tf_tgt[common] > 0].astype(np.int64)), tgt_size)


def _chunks(corpora: list[Corpus], stride: int
            ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]]:
    """CHUNK pairs at a time (every stride-th of each corpus's pairs in use), in run ids: the
    source tokens and each one's pair (row) in the chunk, the same of the targets, the rows."""
    for data, src_map, tgt_map in corpora:
        pairs = data.pairs[::stride]
        for i in range(0, len(pairs), CHUNK):
            rows = pairs[i: i + CHUNK]
            src, s_row = _tokens(data.src.ids, data.src.offsets, rows, src_map)
            tgt, t_row = _tokens(data.tgt.ids, data.tgt.offsets, rows, tgt_map)
            yield src, s_row, tgt, t_row, len(rows)


def _tokens(ids: np.ndarray, offsets: np.ndarray, rows: np.ndarray, remap: np.ndarray | None
            ) -> tuple[np.ndarray, np.ndarray]:
    """The tokens of sequences `rows` back to back (int64, run ids) and each one's row."""
    starts, lens = offsets[rows], offsets[rows + 1] - offsets[rows]
    within = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
    tokens = ids[np.repeat(starts, lens) + within].astype(np.int64)
    return (tokens if remap is None else remap[tokens]), np.repeat(np.arange(len(rows)), lens)


def _unique_per_row(tokens: np.ndarray, rows: np.ndarray, size: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Each row's distinct tokens, sorted by row: (tokens, rows)."""
    key = np.unique(rows * size + tokens)
    return key % size, key // size


def _pair_keys(s_tok: np.ndarray, s_row: np.ndarray, t_tok: np.ndarray, t_row: np.ndarray,
               n: int, tgt_size: int) -> np.ndarray:
    """Every (source token, target token) of the same row as s * tgt_size + t: each source
    token of a row repeated once per target token of that row."""
    t_len = np.bincount(t_row, minlength=n)
    t_start = np.cumsum(t_len) - t_len
    b = t_len[s_row]  # (each source token) the targets it meets
    which = np.repeat(np.arange(len(s_tok)), b)
    within = np.arange(b.sum()) - np.repeat(np.cumsum(b) - b, b)
    return s_tok[which] * tgt_size + t_tok[t_start[s_row[which]] + within]


def _best(s: np.ndarray, t: np.ndarray, score: np.ndarray, src_size: int, k: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """The k best targets t of each source s by score, as CSR (offsets, ids)."""
    order = np.lexsort((t, -score, s))  # by source, then best first (ties: lower id)
    s, t = s[order], t[order]
    first = np.searchsorted(s, s)  # the start of each entry's source group
    keep = (np.arange(len(s)) - first) < k
    s, t = s[keep], t[keep]
    offsets = np.zeros(src_size + 1, np.int64)
    np.cumsum(np.bincount(s, minlength=src_size), out=offsets[1:])
    return offsets, t.astype(np.int64)
