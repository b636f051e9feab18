"""Weights packed once for the CPU's matrix unit: in a bf16 model that only decodes, each
Linear's weight is reordered by oneDNN, at load, into the blocked layout its AMX and
AVX512-BF16 kernels read (`torch.ops.mkldnn._reorder_linear_weight`, the packing Inductor's
freezing does), so no decoding step reorders it again, and the feed-forward's ReLU runs inside
its first product rather than as a pass of its own. CTranslate2 packs its weights the same
way. The gain is largest where a product is small, a decoding step's few hundred rows by a
256-wide model (docs/benchmarks.md#fast-decoding-levers).

float32 keeps torch's own product (MKL's packed form measured no faster, and a float32 model
is the run's own, which training may still hold); int8 has its own packing
(mt.decoding.precision.Int8Linear).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from mt.device import cpu_has_native_bf16

PACK = True  # False: a bf16 model keeps torch's nn.Linear (benchmarks/bench_fast.py's lever)


class PackedLinear(nn.Linear):
    """An nn.Linear of weight (out, in) and bias (out,) or None whose product reads a packed
    copy of its weight: x (..., in) bf16 -> (..., out) bf16, with ReLU applied inside the
    product where `relu`. weight and bias stay (a shortlist reads rows of the weight;
    state_dict is unchanged)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, relu: bool = False):
        nn.Module.__init__(self)
        self.out_features, self.in_features = weight.shape
        self.weight, self.bias = weight, bias
        self.relu = relu
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            # decode.compile traces the plain product: a compiler cannot trace oneDNN's packed
            # tensor (it has no storage), and Inductor lays out the weights it compiles itself
            y = F.linear(x, self.weight, self.bias)
            return y.relu() if self.relu else y
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias,
                                                  "relu" if self.relu else "none", [], "")

    def __deepcopy__(self, memo: dict) -> nn.Linear:
        # oneDNN's packed tensor has no storage to copy: a copy packs its own weight again
        bias = None if self.bias is None else nn.Parameter(self.bias.detach().clone(),
                                                           requires_grad=False)
        return PackedLinear(nn.Parameter(self.weight.detach().clone(), requires_grad=False),
                            bias, self.relu)

    def extra_repr(self) -> str:
        return super().extra_repr() + (", relu" if self.relu else "") + ", packed"


def packable(model: nn.Module) -> bool:
    """Whether `pack` would pack model: bf16 weights on a CPU with bf16 in hardware, and a
    torch built with oneDNN."""
    weight = next(model.parameters(), None)
    return (PACK and weight is not None and weight.dtype == torch.bfloat16
            and weight.device.type == "cpu" and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_linear_pointwise") and cpu_has_native_bf16())


def pack(model: nn.Module) -> nn.Module:
    """model, in place, with each nn.Linear a PackedLinear where `packable` (a feed-forward's
    first with its ReLU); model as it is elsewhere. For a model that only decodes."""
    if not packable(model):
        return model
    for owner in list(model.modules()):
        relu = getattr(owner, "activation", None) == "relu"  # mt.model.FeedForward
        for name, child in list(owner.named_children()):
            if type(child) is nn.Linear:
                setattr(owner, name, PackedLinear(child.weight, child.bias))
            elif isinstance(child, nn.Sequential) and relu and type(child[0]) is nn.Linear:
                child[0] = PackedLinear(child[0].weight, child[0].bias, relu=True)
    return model
