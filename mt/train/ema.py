"""An exponential moving average (EMA) of the model's weights, kept in fp32 beside them.

After each update that was not skipped: ema = d * ema + (1 - d) * weights, with the decay
d = min(train.ema_decay, (1 + n) / (10 + n)) at the n-th update (n = 1, 2, ...). The ramp is
TensorFlow's and OpenNMT-py's: early on, when the weights still move fast, the average follows
them closely instead of holding on to the initial weights for ~1 / (1 - decay) updates; it
needs no start step of its own (fairseq's ema_start_update) and starts from the weights the
run starts with (a fine-tuned run's: its parent's).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


class EMA:
    """The average of every floating-point entry of the model's state dict."""

    def __init__(self, model: torch.nn.Module, decay: float):
        self.decay = decay
        self.updates = 0
        self.shadow = {k: v.detach().float().clone() for k, v in model.state_dict().items()
                       if v.is_floating_point()}

    def decay_at(self, n: int) -> float:
        """The decay of the n-th update."""
        return min(self.decay, (1 + n) / (10 + n))

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        self.updates += 1
        weight = 1.0 - self.decay_at(self.updates)
        own = model.state_dict()
        for k, avg in self.shadow.items():
            avg.lerp_(own[k].detach().float(), weight)  # avg += weight * (w - avg)

    def weights(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """A state dict of the model with the averaged weights, in the model's dtypes."""
        return {k: self.shadow[k].to(v.dtype) if k in self.shadow else v
                for k, v in model.state_dict().items()}

    @contextlib.contextmanager
    def applied(self, model: torch.nn.Module) -> Iterator[None]:
        """The model holds the averaged weights inside (validation), its own again after,
        bit for bit."""
        raw = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(self.weights(model))
        try:
            yield
        finally:
            model.load_state_dict(raw)

    def state_dict(self) -> dict:
        """What last.pt keeps, so that a resumed run continues the same average."""
        return {"decay": self.decay, "updates": self.updates, "shadow": self.shadow}

    def load_state_dict(self, state: dict) -> None:
        if state["shadow"].keys() != self.shadow.keys():
            raise KeyError("the average's tensors are not the model's")
        for k, avg in self.shadow.items():
            avg.copy_(state["shadow"][k])
        self.updates = int(state["updates"])
