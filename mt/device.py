"""Which device to run on, and in which precision: shared by training, eval and translate."""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from mt.errors import RunError

# On a CPU with native bf16, a bf16 training step is faster than fp32's and, after the same
# steps, the model is as good (benchmarks/bench_train.py compares both speed and validation
# loss). So `train.amp: auto` takes bf16 on such CPUs (never where bf16 would be emulated,
# slower than fp32); `train.amp: none` keeps fp32.
CPU_AUTO_BF16 = True


def pick_device(name: str) -> torch.device:
    """auto (CUDA if present, else CPU), cpu, cuda or cuda:N."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RunError(f"--device {name}: no CUDA device is available here; use --device cpu")
    if name != "cpu" and not name.startswith("cuda"):
        raise RunError(f"--device {name}: expected auto, cpu or cuda")
    return torch.device(name)


@functools.cache
def cpu_info() -> tuple[str, frozenset[str]]:
    """The CPU's model name and its feature flags, from /proc/cpuinfo ("CPU unknown" and none
    where there is no such file)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "CPU unknown", frozenset()
    name = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                 if line.startswith("model name")), "CPU unknown")
    return name, frozenset(text.split())


@functools.cache
def cpu_has_amx() -> bool:
    """True where the CPU has AMX tiles (Intel Xeon since Sapphire Rapids): bf16 and int8
    matrix products in hardware."""
    check = getattr(torch.cpu, "_is_amx_tile_supported", None)  # private, in recent torch
    if check is not None:
        return bool(check())
    return "amx_tile" in cpu_info()[1]


@functools.cache
def cpu_has_native_bf16() -> bool:
    """True where the CPU multiplies bf16 in hardware (AVX512-BF16 or AMX on x86, BF16 on Arm).

    Elsewhere autocast still runs in bf16, but through conversions, slower than fp32.
    """
    return _cpu_has(("_is_amx_tile_supported", "_is_avx512_bf16_supported"),
                    {"avx512_bf16", "amx_bf16", "bf16"})  # "bf16": Arm's name


@functools.cache
def cpu_has_int8() -> bool:
    """True where the CPU has int8 dot-product instructions (AVX512-VNNI, AVX-VNNI or AMX)."""
    return _cpu_has(("_is_amx_tile_supported", "_is_vnni_supported"),
                    {"avx512_vnni", "avx_vnni", "amx_int8"})


def _cpu_has(probes: tuple[str, ...], flags: set[str]) -> bool:
    """True where one of torch's probes says so, else where /proc/cpuinfo lists one of flags."""
    for probe in probes:
        check = getattr(torch.cpu, probe, None)  # private probes of recent torch versions
        if check is not None and check():
            return True
    return bool(cpu_info()[1] & flags)


def cuda_has_native_bf16(device: torch.device) -> bool:
    """bf16 in hardware (compute capability 8.0+), not the emulation older GPUs accept."""
    try:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # torch before 2.4 has no including_emulation, and counts emulation
        return torch.cuda.get_device_capability(device) >= (8, 0)


def has_native_bf16(device: torch.device) -> bool:
    """bf16 in hardware on this device (CPU or CUDA); elsewhere it is emulated, slowly."""
    if device.type == "cuda":
        return cuda_has_native_bf16(device)
    return device.type == "cpu" and cpu_has_native_bf16()


def autocast_dtype(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for `train.amp` (auto, bf16, fp16, none) on device; None = fp32.

    auto: on CUDA bf16 where native, else fp16; on CPU bf16 where native, else fp32. fp16 is for
    CUDA: a CPU run given it stays in fp32, so one config serves both.
    """
    if amp == "none":
        return None
    if device.type == "cuda":
        if amp == "auto":
            return torch.bfloat16 if has_native_bf16(device) else torch.float16
        return {"bf16": torch.bfloat16, "fp16": torch.float16}[amp]
    if device.type == "cpu":
        if amp == "bf16" or (amp == "auto" and CPU_AUTO_BF16 and has_native_bf16(device)):
            return torch.bfloat16
        return None
    return None
