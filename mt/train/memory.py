"""Peak memory of the training process, for its validation records: resident memory on CPU
(the kernel's high-water mark, which counts what torch's allocator does not see, such as
oneDNN's kernel cache), memory allocated by torch on CUDA."""

from __future__ import annotations

import ctypes
import ctypes.util
import resource
import sys

import torch


def peak_memory(device: torch.device) -> dict:
    """{"peak_rss_mib": ...} on CPU, {"peak_cuda_mib": ...} on CUDA: this process's peak so
    far, in MiB."""
    if device.type == "cuda":
        return {"peak_cuda_mib": round(torch.cuda.max_memory_allocated(device) / 2**20, 1)}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return {"peak_rss_mib": round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)}


MEMORY_KEYS = ("peak_rss_mib", "peak_cuda_mib")


def format_peak(record: dict) -> str:
    """'1.20 GiB resident' (or 'CUDA allocated') from a validation record; '' if none."""
    for key, kind in zip(MEMORY_KEYS, ("resident", "CUDA allocated"), strict=True):
        if isinstance(record.get(key), (int, float)):
            return f"{record[key] / 1024:.2f} GiB {kind}"
    return ""


def _libc_trim():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_trim = _libc_trim() if sys.platform.startswith("linux") else None


def release_freed() -> None:
    """Give the memory glibc holds freed back to the system. Batches of different shapes free
    and allocate blocks of different sizes, and glibc keeps the freed ones between others:
    hundreds of MB after a few updates, which the next batch may not fit in. The next
    allocations fault the pages in again, so it costs speed when called too often
    (docs/benchmarks.md#memory-and-batch-shapes). A no-op where the C library is not glibc."""
    if _trim is not None:
        _trim(0)
