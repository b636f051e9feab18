"""mt/train/distributed.py: which batches each rank trains."""

from mt.train.distributed import update_positions


def test_update_positions_cover_an_epoch_once_on_any_number_of_ranks():
    for world, accum, n in [(1, 1, 7), (2, 1, 7), (2, 3, 7), (3, 2, 20), (4, 1, 3)]:
        seen, start = [], 0
        while start < n:
            parts = [update_positions(start, n, world, accum, r) for r in range(world)]
            assert all(len(p) <= accum for p in parts)
            seen += [i for p in parts for i in p]
            start = min(start + world * accum, n)
        assert sorted(seen) == list(range(n)), (world, accum, n)
