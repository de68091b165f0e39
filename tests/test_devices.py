"""lpips_core.devices: the one rule that turns a device request into a torch.device."""

from __future__ import annotations

import pytest
import torch

import lpips_core
from lpips_core.devices import resolve_device


def test_auto_prefers_cuda_then_mps_then_cpu():
    want = "cuda" if torch.cuda.is_available() else (
        "mps" if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available() else "cpu")
    assert resolve_device(None).type == resolve_device("auto").type == want
    assert resolve_device("cpu") == resolve_device(torch.device("cpu")) == torch.device("cpu")
    assert lpips_core.resolve_device is resolve_device  # the package's lazy name is this function


@pytest.mark.parametrize("device, match", [
    ("meta", "device must be 'auto', 'cpu', 'cuda' or 'mps', got 'meta'"),
    ("gpu", "device must be 'auto', 'cpu', 'cuda' or 'mps', got 'gpu'"),
    (3.5, "device must be 'auto', 'cpu', 'cuda' or 'mps', got 3.5"),
])
def test_an_unknown_device_is_one_clear_error(device, match):
    with pytest.raises(ValueError, match=match):
        resolve_device(device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here")
def test_a_missing_gpu_is_named():
    with pytest.raises(ValueError, match="device 'cuda:1' requested but CUDA is not available here"):
        resolve_device("cuda:1")
