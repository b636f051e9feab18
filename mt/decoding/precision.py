"""The model in decode.dtype (`decoding_model`): itself for float32, else a copy in bf16 or
int8, and the weight layout that a CPU model that only decodes multiplies fastest
(`inference_layout`).

int8: every Linear layer, the output projection included, multiplies in int8. Weights are
quantized once, per output row (symmetric, scale = max |w| / 127); activations per call, by
torch's dynamic quantized linear on oneDNN, which uses VNNI or AMX int8 instructions.
Everything else (embeddings, LayerNorm, attention scores) stays float32. Where there is no
fast int8 kernel (a CPU without VNNI/AMX, CUDA) decoding falls back to float32 with one
warning (docs/decoding.md#int8)."""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from mt.decoding.packed import pack
from mt.device import cpu_has_amx, cpu_has_int8, has_native_bf16
from mt.errors import ConfigError
from mt.log import warn

ENGINE = "onednn"  # torch's quantized backend: faster than fbgemm at decoding's row counts


def quantizable() -> bool:
    """This torch build has the dynamic quantized linear on oneDNN."""
    return (ENGINE in torch.backends.quantized.supported_engines
            and hasattr(torch.ops.quantized, "linear_dynamic"))


class Int8Linear(nn.Module):
    """y = x W^T + b with W in int8 (per-row scales) and x quantized per call; x (..., in)
    float32 -> (..., out) float32."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        w = weight.detach().float().contiguous()  # (out, in)
        scale = (w.abs().amax(1).clamp_min(1e-12) / 127).double()
        zero = torch.zeros(w.size(0), dtype=torch.long)
        old = torch.backends.quantized.engine
        with warnings.catch_warnings():  # torch marks quantized tensors deprecated; still here
            warnings.simplefilter("ignore")
            qw = torch.quantize_per_channel(w, scale, zero, 0, torch.qint8)
            torch.backends.quantized.engine = ENGINE  # the packing decides the kernel
            try:
                self.packed = torch.ops.quantized.linear_prepack(
                    qw, None if bias is None else bias.detach().float().contiguous())
            finally:
                torch.backends.quantized.engine = old
        self.in_features, self.out_features = w.size(1), w.size(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # reduce_range False: VNNI/AMX accumulate in int32, so 8-bit activations cannot overflow
        return torch.ops.quantized.linear_dynamic(x, self.packed, False)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def int8_model(model: nn.Module, device: torch.device) -> nn.Module:
    """A copy of model (a Seq2Seq or an Ensemble) with every Linear in int8; on a device
    without a fast int8 kernel, model itself (float32) after one warning."""
    if not quantizable():
        raise ConfigError("decode.dtype int8: this torch build has no quantized linear on "
                          "oneDNN (torch.backends.quantized.supported_engines: "
                          f"{', '.join(torch.backends.quantized.supported_engines)}); decode "
                          "in float32 or bf16, or export int8 for CTranslate2 (mt export "
                          "--quantization int8)")
    if device.type != "cpu" or not cpu_has_int8():
        where = ("CUDA" if device.type == "cuda" else
                 f"this {device.type.upper()}" if device.type != "cpu" else
                 "a CPU without VNNI or AMX")
        warn(f"decode.dtype int8: no fast int8 kernel on {where}; decoding in float32")
        return model
    out = copy.deepcopy(model)
    for owner in list(out.modules()):
        bias_of_generator = getattr(owner, "logits_bias", None)
        for name, child in list(owner.named_children()):
            if not isinstance(child, nn.Linear):
                continue
            bias = child.bias
            if name == "generator" and bias_of_generator is not None:
                bias = bias_of_generator  # Marian's logits bias, folded into the product
            setattr(owner, name, Int8Linear(child.weight, bias))
        if bias_of_generator is not None:
            owner.logits_bias = None  # now inside the generator: next_scores calls it
    return out


def inference_layout(model: torch.nn.Module) -> None:
    """In place, on a CPU model that only decodes: every Linear's weight (out, in) re-laid out
    as the transpose of a contiguous (in, out) matrix. Same values; MKL multiplies the few rows
    of a decoding step by that layout up to twice as fast (benchmarks/bench_hf.py). An
    embedding tied to the output projection follows it, and its lookups, a few rows a step,
    barely notice. Not for a model that trains: gradients and optimizers expect the usual
    layout."""
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and module.weight.device.type == "cpu":
            module.weight.data = module.weight.data.t().contiguous().t()


def fastest_dtype(device: torch.device) -> str:
    """decode.dtype auto: the dtype mt decodes fastest in on this device. A CPU with AMX: bf16
    (its weights packed, mt.decoding.packed); with VNNI but no AMX: int8; with bf16 in
    hardware and neither: bf16; else float32. A GPU: bf16 where native, else float32. Measured
    on each kind of CPU in docs/benchmarks.md#decodedtype-auto."""
    if device.type != "cpu":
        return "bf16" if has_native_bf16(device) else "float32"
    if cpu_has_amx():
        return "bf16"
    if cpu_has_int8() and quantizable():
        return "int8"
    return "bf16" if has_native_bf16(device) else "float32"


def decoding_model(model: nn.Module, dtype: str, device: torch.device) -> nn.Module:
    """The model in decode.dtype: itself for float32; for bf16 and int8 a copy, so the run's
    float32 model stays as it is for whoever else holds it; auto as `fastest_dtype`."""
    if dtype == "auto":
        dtype = fastest_dtype(device)
    if dtype == "int8":
        return int8_model(model, device)
    if dtype != "bf16":
        return model
    if not has_native_bf16(device):
        warn(f"decode.dtype bf16: this {device.type.upper()} device has no native bf16, so it "
             "is emulated and slower than float32")
    return pack(copy.deepcopy(model).to(torch.bfloat16))
