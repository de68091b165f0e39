"""Two images in, one number out: :func:`distance`, the shortest way to use the library.

:func:`distance` takes two files (any format :func:`lpips_core.images.load_image` reads) or two
arrays and returns a Python float, for any metric in any configuration (a
:class:`~lpips_core.spec.MetricSpec`). ``python -m lpips_core compare`` runs the same code
(:func:`compare_images`), so the two always agree. Models are built once per configuration and
device and kept (:func:`model_for`); pass ``model=`` to use one you hold.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from .caching import LRU
from .spec import MetricSpec, parse_spec

__all__ = ["compare_images", "distance", "model_for", "read_image"]

#: How many models :func:`model_for` keeps (VGG16 holds ~0.5 GB).
MAX_MODELS = 4
_MODELS: LRU[tuple[str, str], Any] = LRU(MAX_MODELS)
_BUILD_LOCK = threading.Lock()


def model_for(spec: MetricSpec, device=None):
    """The frozen model of a learned ``spec`` on ``device``, built on first use and kept (at most
    :data:`MAX_MODELS`, the least recently used dropped first)."""
    from .devices import resolve_device

    key = (spec.model_spec.name, str(resolve_device(device)))
    with _BUILD_LOCK:  # one build per configuration, however many threads ask at once
        return _MODELS.get_or_compute(key, lambda: spec.build(device=device))


def read_image(image: Any) -> np.ndarray:
    """A path (``str`` or ``os.PathLike``), or an ``(H, W, 3)`` array (float in ``[0, 1]`` or
    ``uint8``), as ``(H, W, 3)`` float32 in ``[0, 1]``.

    Raises:
        ValueError: an unreadable file or a bad array. TypeError: neither a path nor an array.
    """
    from .images import load_image

    if isinstance(image, (str, os.PathLike)):
        return load_image(image).array
    if isinstance(image, np.ndarray):
        arr = image.astype(np.float32) / 255.0 if image.dtype == np.uint8 else np.asarray(image, dtype=np.float32)
        if arr.ndim != 3 or arr.shape[2] != 3:
            raise ValueError(f"an image array must have shape (H, W, 3), got {image.shape}")
        if not (np.isfinite(arr).all() and arr.min() >= 0 and arr.max() <= 1):
            raise ValueError("a float image array must lie in [0, 1] (uint8 arrays are divided by 255)")
        return arr
    raise TypeError(f"an image must be a path or an (H, W, 3) array, got {type(image).__name__}")


def compare_images(spec: MetricSpec, a: np.ndarray, b: np.ndarray, *, model=None, method: str = "bilinear",
                   device=None):
    """``spec`` on two ``(H, W, 3)`` images in ``[0, 1]``: a float for a classic metric, the
    :class:`~lpips_core.protocol.MetricResult` of the pair (no spatial maps) for a learned one.

    Raises:
        ValueError: the images differ in size and ``spec.size`` is not set.
    """
    if spec.size is None and a.shape != b.shape:
        raise ValueError(f"the images differ in size ({a.shape[1]}×{a.shape[0]} and {b.shape[1]}×{b.shape[0]} px, "
                         "width×height); give a size to resize both")
    if not spec.learned:
        return spec.classic(a, b)
    model = model if model is not None else model_for(spec, device)
    x = spec.prepare(a, method=method, device=model.device)
    y = spec.prepare(b, method=method, device=model.device)
    return model.compare(x, y, spatial=False)


def distance(a: Any, b: Any, metric: str | MetricSpec = "lpips", *, net: str | None = None,
             version: str | None = None, lin: bool = True, convention: str | None = None,
             grayscale: bool = False, size: int | tuple[int, int] | None = None, method: str = "bilinear",
             device=None, model=None) -> float:
    """The distance (or, for PSNR and SSIM, the similarity) between two images, as a float.

    Args:
        a, b: the reference and the test image: file paths, or ``(H, W, 3)`` arrays (float in
            ``[0, 1]`` or ``uint8``). Files are read as 8-bit RGB scaled ``x / 255``, as the CLI does.
        metric: ``"lpips"`` (default), ``"stlpips"``, ``"dists"``, ``"mse"``, ``"psnr"``, ``"ssim"``,
            a full spec name (``"lpips-vgg-0.0-baseline"``) or a :class:`~lpips_core.spec.MetricSpec`;
            the keyword options fill what the name leaves out.
        net, version, lin, convention, grayscale, size: the configuration (defaults: the metric's
            own: AlexNet, v0.1, lin, its correct input range, colour, native size).
        method: the resize filter when ``size`` is given.
        device: where a learned metric runs (default: CUDA, then MPS, then CPU).
        model: a model you built for this configuration (otherwise one is built once and kept).

    Example:
        >>> from lpips_core import distance
        >>> round(distance("tests/data/ex_ref.png", "tests/data/ex_p0.png"), 3)  # the published 0.722
        0.722

    Raises:
        ValueError: an unknown metric or option, unreadable images, different sizes without ``size``.
        WeightsUnavailable: the weights are missing (the message says how to fix it).
    """
    spec = parse_spec(metric, net=net, version=version, lin=lin, convention=convention, grayscale=grayscale,
                      size=size)
    res = compare_images(spec, read_image(a), read_image(b), model=model, method=method, device=device)
    return float(res)
