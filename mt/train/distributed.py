"""Several processes under torchrun: this rank's place and device, the collectives the loop uses,
and which batches each rank trains. With one process every collective is a no-op."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from mt.device import pick_device


class Group:
    """The ranks training together (one, without torchrun), from torchrun's environment."""

    def __init__(self, device: str = "auto"):
        self.rank = int(os.environ.get("RANK", 0))
        self.world = int(os.environ.get("WORLD_SIZE", 1))
        self.device = pick_device(device)
        if self.world > 1:
            if self.device.type == "cuda":
                # modulo: ranks may share a GPU (with MT_DIST_BACKEND=gloo; NCCL refuses)
                local = int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count()
                self.device = torch.device("cuda", local)
                torch.cuda.set_device(self.device)
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            dist.init_process_group(os.environ.get("MT_DIST_BACKEND") or backend)

    @property
    def main(self) -> bool:
        """Rank 0: the one that owns the run directory, writes checkpoints and logs."""
        return self.rank == 0

    def barrier(self) -> None:
        """Wait for every rank (e.g. for rank 0's save before anyone exits, or torchrun stops
        rank 0 mid-save when the first rank exits with an error)."""
        if self.world > 1:
            dist.barrier()

    def sum(self, tensor: torch.Tensor) -> None:
        """In place: the sum over ranks."""
        if self.world > 1:
            dist.all_reduce(tensor)

    def max(self, tensor: torch.Tensor) -> None:
        """In place: the largest value over ranks."""
        if self.world > 1:
            dist.all_reduce(tensor, op=dist.ReduceOp.MAX)

    def broadcast(self, tensor: torch.Tensor) -> None:
        """In place: rank 0's value."""
        if self.world > 1:
            dist.broadcast(tensor, src=0)

    def interleave(self, mine: list) -> list:
        """Every rank's list, where rank r holds items r, r + world, r + 2 * world, ... of the
        whole, merged back into its order."""
        if self.world == 1:
            return mine
        parts: list = [None] * self.world
        dist.all_gather_object(parts, mine)
        whole: list = [None] * sum(len(part) for part in parts)
        for rank, part in enumerate(parts):
            whole[rank::self.world] = part
        return whole

    def close(self) -> None:
        """Leave the process group once every rank is done."""
        if self.world > 1:
            self.barrier()
            dist.destroy_process_group()


def update_positions(start: int, n_batches: int, world: int, accum: int, rank: int) -> list[int]:
    """Positions in the epoch's batch list that `rank` trains in the update starting at `start`.

    An update takes the next world * accum batches (fewer at the epoch's end); micro-batch i of
    rank r is batch start + i * world + r. So N ranks of k micro-batches train exactly what one
    rank of N * k does, and an epoch split between runs on any numbers of ranks trains each of
    its batches once.
    """
    return list(range(start + rank, min(start + world * accum, n_batches), world))


def epoch_updates(position: int, n_batches: int, world: int, accum: int,
                  rank: int) -> list[tuple[list[int], bool]]:
    """This rank's micro-batch positions in each update left in the epoch (from `position`),
    each with `idle`: a rank left without a batch in the epoch's last update runs one (the
    update's first) at weight 0, since every rank joins the gradient all-reduce."""
    updates = []
    for start in range(position, n_batches, world * accum):
        mine = update_positions(start, n_batches, world, accum, rank)
        updates.append((mine or [start], not mine))
    return updates
