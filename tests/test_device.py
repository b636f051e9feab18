"""mt/device.py: --device names (a device that is not here, or not one, is one line); which
dtype train.amp means on CPU is in test_train_step.py, on CUDA in test_gpu.py."""

import pytest
import torch

from mt.device import pick_device
from mt.errors import RunError


def test_device_names_and_devices_that_are_not_here():
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(RunError, match="--device tpu: expected auto, cpu or cuda"):
        pick_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RunError, match="--device cuda:1: no CUDA device is available here"):
            pick_device("cuda:1")
