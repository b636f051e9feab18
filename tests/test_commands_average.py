"""mt/commands/average.py: `mt average` over a run's step checkpoints."""

import pytest
import torch

from mt.checkpoint import load_checkpoint, save_checkpoint
from mt.commands.average import average_run
from mt.errors import CheckpointError


def test_average_of_known_checkpoints(tmp_path):
    for step, value in ((10, 100.0), (20, 1.0), (30, 2.0), (40, 6.0)):
        save_checkpoint(tmp_path / f"ckpt.{step}.pt",
                        {"model": {"w": torch.full((2, 3), value), "n": torch.tensor([7])},
                         "step": step})
    out = average_run(tmp_path, 3, tmp_path / "avg.pt")
    state = load_checkpoint(out)
    assert torch.equal(state["model"]["w"], torch.full((2, 3), 3.0))  # (1 + 2 + 6) / 3
    assert torch.equal(state["model"]["n"], torch.tensor([7]))
    assert state["step"] == 40 and state["averaged_steps"] == [20, 30, 40]
    with pytest.raises(CheckpointError, match="4 step checkpoint"):
        average_run(tmp_path, 5)
