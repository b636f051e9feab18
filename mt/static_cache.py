"""A decoding cache of fixed shapes (StaticCache): each decoder layer's self-attention keys and
values preallocated for the search's length limit and written at the step's position, rather
than grown by a copy every step (mt.model.DecoderCache).

Rows that finish stay in the buffers, computed and ignored, until the live rows fall to a
smaller rung of a short ladder (`bucket`: 1, 2, 3, 4, 6, 8, 12, 16, 24, ...); only then are the
live rows compacted into smaller buffers. So a search visits a few shapes, not one per step,
and copies its cache a few times, not at every step. Beam search still moves hypotheses
between the rows of a sentence: that is one copy of the written positions, into a second
set of buffers (`spare`), as mt.model._extend copies them today.

Padded (what a compiled step needs, mt.decoding.compiled): the sentences, the source length
and the length limit rounded up to the ladder, and every step attends to the whole buffer
under a mask, so the shapes depend on the rungs only. Unpadded (eager), the buffers are as
large as the batch and each step reads the positions written so far.

Shapes: N sentence slots, G rows per sentence (K in beam search), R = N * G buffer rows,
r live rows (the search's), H heads, S source length, L positions, Dh head width.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F

from mt.vocab import PAD

KV = tuple[torch.Tensor, torch.Tensor]  # keys, values: (B, H, L, Dh) each


def bucket(n: int) -> int:
    """The smallest rung of the ladder 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, ... (powers of two and
    three quarters of them) that holds n: padding to it adds less than half."""
    if n <= 2:
        return max(n, 1)
    p = 1 << (n - 1).bit_length()  # the smallest power of two >= n
    return p * 3 // 4 if n <= p * 3 // 4 else p


def _pick(x: torch.Tensor, index: torch.Tensor, n: int) -> torch.Tensor:
    """Rows index of x, then the first row again up to n rows: padding rows that hold real
    values (a row of zeros would make a source mask with nothing to attend to: NaN)."""
    if n > len(index):
        index = torch.cat([index, index[:1].expand(n - len(index))])
    return x.index_select(0, index)


@dataclass
class StaticCache:
    """What a decoding step reads and writes, in buffers of fixed size (see the module)."""

    pos: int  # positions written so far
    src_mask: torch.Tensor  # (N, 1, 1, S)
    cross: list[KV]  # per layer: the encoder's keys/values, computed once, (N, H, S, Dh)
    keys: list[torch.Tensor]  # per layer: self-attention keys (R, H, L, Dh)
    values: list[torch.Tensor]  # per layer: self-attention values (R, H, L, Dh)
    group: int  # G
    src_len: int  # S before padding: the attention weights a step gives are cut back to it
    padded: bool  # shapes on the ladder, whole buffers under a mask (a compiled step's)
    # (r,) the buffer row of each live row; None: every row, in order
    live: torch.Tensor | None = None
    # model -> the function that runs its step (Seq2Seq.decode_static's arguments): a
    # compiled one (mt.decoding.compiled); None: the model's own decode_static
    core: Callable[[Any], Callable] | None = None
    spare: list[torch.Tensor] | None = None  # keys then values: where beam moves copy to

    @classmethod
    def start(cls, src_mask: torch.Tensor, cross: list[KV], group: int, length: int,
              padded: bool = False, core: Callable | None = None) -> StaticCache:
        """Buffers of `length` positions for a fresh cache's rows: src_mask (N, 1, 1, S) and
        cross (N, H, S, Dh) per sentence, `group` rows each."""
        n, S = src_mask.size(0), src_mask.size(-1)
        if padded:  # the ladder's shapes, the padding masked
            pad = bucket(S) - S
            src_mask = F.pad(src_mask, (0, pad), value=False)
            cross = [(F.pad(k, (0, 0, 0, pad)), F.pad(v, (0, 0, 0, pad))) for k, v in cross]
            length = bucket(length)
        rows = torch.arange(n * group, device=src_mask.device)
        cache = cls(0, src_mask, cross, [], [], group, S, padded, None, core)
        return cache._rebuild(rows, group, length, keep=0)

    def decode(self, model, tgt: torch.Tensor, need_weights: bool = False) -> tuple:
        """model.decode (mt.model.Seq2Seq) of the live rows' newest tokens tgt (r, 1) ->
        their states (r, 1, D), the cache a position further and, with need_weights, each
        layer's cross-attention (r, H, 1, S). Written in place: this cache is spent."""
        R = self.keys[0].size(0)
        tokens = tgt if self.live is None else tgt.new_full((R, 1), PAD).index_copy_(
            0, self.live, tgt)  # rows that are not live take <pad>: computed, never read
        step = model.decode_static if self.core is None else self.core(model)
        pos = torch.tensor([self.pos], device=tgt.device)
        states, weights = step(tokens, pos, self.keys, self.values, self.cross, self.src_mask,
                               None if self.padded else self.pos + 1, need_weights)
        if self.live is not None:
            states = states.index_select(0, self.live)
        out = (states, replace(self, pos=self.pos + 1))
        if not need_weights:
            return out
        return out + ([self._cut(w) for w in weights],)

    def _cut(self, w: torch.Tensor) -> torch.Tensor:
        """A step's weights (R, H, 1, S padded) -> the live rows' (r, H, 1, S)."""
        w = w[..., : self.src_len]
        return w if self.live is None else w.index_select(0, self.live)

    def reorder(self, index: torch.Tensor, group: int | None = None) -> StaticCache:
        """As DecoderCache.reorder: the live rows index (r',) go on, `group` per sentence
        (default: unchanged), each block of `group` drawn from one sentence's rows."""
        group = group or self.group
        rows = index if self.live is None else self.live[index]  # (r',) buffer rows
        n = len(rows) // group  # live sentences
        if group != self.group or bucket(n) < self.src_mask.size(0):  # a rung down: compact
            return self._rebuild(rows, group, self.keys[0].size(2), keep=self.pos)
        if group > 1:  # beams move: each block to its sentence's rows
            dest = ((rows[::group] // group)[:, None] * group
                    + torch.arange(group, device=rows.device)).flatten()
            if not torch.equal(dest, rows):
                self._move(rows, dest)
            rows = dest
        R = self.keys[0].size(0)
        whole = len(rows) == R and torch.equal(rows, torch.arange(R, device=rows.device))
        return replace(self, live=None if whole else rows)

    def _move(self, rows: torch.Tensor, dest: torch.Tensor) -> None:
        """In place: the written positions of buffer rows `rows` copied to rows `dest`, in
        one copy (into the spare buffers, which then swap with the current ones)."""
        R, P = self.keys[0].size(0), self.pos
        full = torch.arange(R, device=rows.device).index_copy_(0, dest, rows)
        if self.spare is None:
            self.spare = [torch.zeros_like(b) for b in self.keys + self.values]
        current = self.keys + self.values
        for src, out in zip(current, self.spare, strict=True):
            torch.index_select(src[:, :, :P], 0, full, out=out[:, :, :P])
        n = len(self.keys)
        self.keys, self.values, self.spare = self.spare[:n], self.spare[n:], current

    def _rebuild(self, rows: torch.Tensor, group: int, length: int, keep: int) -> StaticCache:
        """New buffers for the rows `rows` (r,) of these, `group` per sentence, their first
        `keep` positions copied: as few sentence slots as they need (padded: the ladder's)."""
        n = len(rows) // group
        slots = bucket(n) if self.padded else n
        sent = rows[::group] // self.group  # (n,) each new sentence's slot here
        src_mask = _pick(self.src_mask, sent, slots)
        cross = [(_pick(k, sent, slots), _pick(v, sent, slots)) for k, v in self.cross]
        k0 = cross[0][0]
        R, H, Dh = slots * group, k0.size(1), k0.size(3)

        def grown(old: torch.Tensor | None) -> torch.Tensor:
            # zeros, not empty: masked positions are still multiplied by 0 (0 * NaN = NaN)
            buf = k0.new_zeros(R, H, length, Dh)
            if keep:
                torch.index_select(old[:, :, :keep], 0, rows, out=buf[: len(rows), :, :keep])
            return buf

        keys = [grown(k) for k in self.keys] or [grown(None) for _ in cross]
        values = [grown(v) for v in self.values] or [grown(None) for _ in cross]
        live = None if len(rows) == R else torch.arange(len(rows), device=rows.device)
        return replace(self, src_mask=src_mask, cross=cross, keys=keys, values=values,
                       group=group, live=live, spare=None)
