"""Several processes under torchrun: which batches each rank trains."""

from __future__ import annotations


def update_positions(start: int, n_batches: int, world: int, accum: int, rank: int) -> list[int]:
    """Positions in the epoch's batch list that `rank` trains in the update starting at `start`.

    An update takes the next world * accum batches (fewer at the epoch's end); micro-batch i of
    rank r is batch start + i * world + r. So N ranks of k micro-batches train exactly what one
    rank of N * k does, and an epoch split between runs on any numbers of ranks trains each of
    its batches once.
    """
    return list(range(start + rank, min(start + world * accum, n_batches), world))
