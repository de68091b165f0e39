"""Where a model runs: the one rule that turns a device request into a :class:`torch.device`.

``None`` or ``"auto"`` picks CUDA when it is available, then Apple MPS, then the CPU; an explicit
device (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``) is validated, so asking for a GPU that is
not there fails with one clear message instead of an error deep inside PyTorch. Every model
(:meth:`lpips_core.protocol.LearnedMetric._finish`), the dataset scorer, the CLI's ``--device``
and :func:`lpips_core.distance` resolve their device here.
"""

from __future__ import annotations

import torch

__all__ = ["resolve_device"]


def resolve_device(device: torch.device | str | None = None) -> torch.device:
    """``None``/``"auto"`` → CUDA if available, then Apple MPS, then CPU; else ``torch.device(device)``.

    Raises:
        ValueError: an unknown device string, or CUDA/MPS requested where it is not available.
    """
    if device is None or device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'mps', got {device!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} requested but CUDA is not available here")
    if dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(f"device {str(device)!r} requested but Apple MPS is not available here")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'mps', got {device!r}")
    return dev
