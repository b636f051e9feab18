"""decode.compile: the decoding step (mt.model.Seq2Seq.decode_static over a padded
mt.static_cache.StaticCache) compiled by torch.compile with Inductor, once per shape the
search visits: (rows, source length, length limit) rungs of the ladder, with or without the
attention weights. `wanted` decides per search request, `step_of` gives a model's compiled
step.

on: always compiled. off: never. auto: compiled once the process has decoded BREAK_EVEN source
tokens with the model, and never for a request of one sentence: one interactive line, or a
short job, does not pay the compilation (tens of seconds on a CPU).

Compiled graphs are cached on disk by Inductor (its FX graph cache), under
$MT_CACHE_DIR/inductor/torch-<version>/ (mt.token_cache.keys.cache_root), so a second process
(`mt serve`, another `mt translate`) loads them rather than compiling again. Inductor keys an
entry by the graph (the model's architecture and shapes, not its weights, which stay inputs),
torch's version and configuration, and the C++ compiler's flags (the CPU's instruction set):
another model, torch or CPU compiles its own.
"""

from __future__ import annotations

import functools
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch

from mt.log import info
from mt.token_cache.keys import cache_root
from mt.vocab import PAD

# auto: source tokens a process decodes with one model before its steps are compiled. No
# break-even exists yet: on a CPU the compiled step was measured slower than the eager one
# (docs/benchmarks.md#fast-decoding-levers), which is why decode.compile defaults to off.
BREAK_EVEN = 20_000
# Inductor's options. No freezing: its graphs hold the weights as constants, which Inductor's
# disk cache refuses to keep (every process would compile again), and which would tie a
# compiled step to one model's weights. cpp_wrapper: kernels called from C++ rather than from
# Python, what a step of many small kernels wants; not yet measured against Python's calls.
OPTIONS: dict[str, object] = {"cpp_wrapper": False}
# recompiles allowed on the step's code: every rung and model (an ensemble's members) share it
RECOMPILE_LIMIT = 64


@dataclass
class Stats:
    compiles: int = 0  # graphs compiled (or loaded from the disk cache) in this process


STATS = Stats()
_decoded: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> source tokens


def wanted(mode: str, model: torch.nn.Module, src: torch.Tensor) -> bool:
    """Whether a search of src (B, S) with model compiles its step under decode.compile mode;
    counts src's tokens for auto."""
    before = _decoded.get(model, 0)
    _decoded[model] = before + int((src != PAD).sum())
    if mode == "auto":
        return src.size(0) > 1 and before >= BREAK_EVEN
    return mode == "on"


def inductor(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The backend: `lower`, counting what it compiles, one line each (a recompile shows)."""
    STATS.compiles += 1
    info(f"decode.compile: compiling a shape of the decoding step ({STATS.compiles} in this "
         "process)")
    return lower(gm, example_inputs)


def lower(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """A graph of the step as Inductor compiles it, with OPTIONS."""
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs, config_patches=OPTIONS)


_step: Callable | None = None  # Seq2Seq.decode_static compiled: one for every model


def step_of(model: torch.nn.Module) -> Callable:
    """model's decode_static, compiled (each model and shape compiles on first use)."""
    global _step
    if _step is None:
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(
            cache_root() / "inductor" / f"torch-{torch.__version__}"))
        # the function, not a bound method: models share it, and none is held by a cache here
        _step = torch.compile(type(model).decode_static, backend=inductor, dynamic=False,
                              recompile_limit=RECOMPILE_LIMIT)
    return functools.partial(_step, model)
