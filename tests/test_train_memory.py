"""mt/train/memory.py: returning the memory glibc holds freed."""

import pytest

from mt.train import memory


def resident_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(memory._trim is None, reason="glibc's malloc_trim is not here")
def test_release_freed_gives_back_the_holes_between_live_blocks():
    # 64 KiB blocks (below glibc's mmap threshold) from the heap; every other one freed leaves
    # 50 MiB of holes between live blocks, which free() cannot give back and malloc_trim can.
    blocks = [bytearray(64 * 1024) for _ in range(1600)]
    for b in blocks:
        b[::4096] = b"\1" * len(b[::4096])  # touch every page
    del blocks[::2]
    before = resident_mib()
    memory.release_freed()
    assert before - resident_mib() > 30
    assert len(blocks) == 800
