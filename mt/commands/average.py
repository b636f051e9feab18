"""`mt average`: the mean of a run's last N step checkpoints (ckpt.STEP.pt), as one checkpoint.

Averaging the weights of the last few checkpoints usually scores a little higher than the last
one alone. The result is a one-file checkpoint like best.pt (config, vocabularies and tokenizer
files carried over from the newest of them): `mt eval`, `translate`, `export` and `info` take it
anywhere.
"""

from __future__ import annotations

from pathlib import Path

import torch

from mt.checkpoint import load_checkpoint, save_checkpoint, step_checkpoints
from mt.errors import CheckpointError
from mt.train.lineage import averaged, record


def average_weights(states: list[dict], names: list[str]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the checkpoints' model weights (in float64, stored as saved).

    Every checkpoint must hold the same tensors with the same shapes; names label them in errors.
    """
    first = states[0]["model"]
    total = {k: v.double() if v.is_floating_point() else v for k, v in first.items()}
    for state, name in zip(states[1:], names[1:]):
        weights = state["model"]
        if weights.keys() != first.keys() or any(
                weights[k].shape != v.shape for k, v in first.items()):
            raise CheckpointError(f"{name}: holds other weights than {names[0]}; average "
                                  "checkpoints of one run")
        for k, v in weights.items():
            if v.is_floating_point():
                total[k] += v.double()
    n = len(states)
    return {k: (v / n).to(first[k].dtype) if first[k].is_floating_point() else v
            for k, v in total.items()}


def average_run(run: Path, last: int, out: Path | None = None) -> Path:
    """Average RUN's newest `last` ckpt.STEP.pt files into out (default RUN/average.pt)."""
    run = Path(run)
    if not run.is_dir():
        raise CheckpointError(f"{run}: not a run directory")
    found = step_checkpoints(run)
    if len(found) < last:
        raise CheckpointError(f"{run}: {len(found)} step checkpoint(s) (ckpt.STEP.pt), "
                              f"--last {last} asked; train with train.keep_checkpoints: "
                              f"{last} or more, or average fewer")
    chosen = found[-last:]
    states = [load_checkpoint(path) for _, path in chosen]
    weights = average_weights(states, [str(path) for _, path in chosen])
    out = Path(out) if out is not None else run / "average.pt"
    steps = [step for step, _ in chosen]
    # Everything but the weights from the newest checkpoint (step checkpoints carry no
    # training state), so the average is self-contained as they are; its lineage names them.
    lineage = averaged([record(path, state) for (_, path), state in zip(chosen, states)])
    save_checkpoint(out, {**states[-1], "model": weights, "averaged_steps": steps,
                          "lineage": lineage})
    return out
