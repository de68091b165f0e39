"""A small built-in dataset: ground truth and two "methods" that the metrics rank differently.

:func:`make_demo` cuts square patches from the sample photos (``sample_images/``) and writes, as
PNG files with the same names in three folders:

- ``reference/``: the patches;
- ``A-blur/``: each patch blurred (Gaussian, ``sigma`` :data:`BLUR_SIGMA`);
- ``B-shift-noise/``: each patch shifted by :data:`SHIFT` pixels (reflected edges) plus white
  Gaussian noise of ``sigma`` :data:`NOISE_SIGMA` (seeded).

Pixel-wise metrics (MSE, PSNR, SSIM) prefer the blur; LPIPS prefers the shifted, noisy copy,
which keeps the texture a blur destroys — the disagreement the dataset page is meant to show.
The same arguments always give the same files, bit for bit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lpips_explorer import distortions
from lpips_core.images import image_to_png_bytes, load_image

__all__ = ["BLUR_SIGMA", "DemoSet", "NOISE_SIGMA", "SAMPLES_DIR", "SHIFT", "make_demo"]

SAMPLES_DIR = Path(__file__).resolve().parents[1] / "sample_images"
BLUR_SIGMA = 2.0
SHIFT = (2, 1)
NOISE_SIGMA = 0.03
FOLDERS = ("reference", "A-blur", "B-shift-noise")


@dataclass(frozen=True)
class DemoSet:
    """The demo's folders: ``reference`` and ``methods`` (``{"A-blur": path, "B-shift-noise": path}``)."""

    reference: Path
    methods: dict[str, Path]
    names: tuple[str, ...]


def _patches(img: np.ndarray, side: int, per_image: int) -> list[np.ndarray]:
    """``per_image`` patches of ``side`` px on the image's diagonal (evenly spaced, deterministic)."""
    h, w = img.shape[:2]
    if min(h, w) < side:
        raise ValueError(f"side {side} exceeds the image's {h}x{w}")
    fr = np.linspace(0.25, 0.75, per_image) if per_image > 1 else np.array([0.5])
    # each patch centred on its point of the diagonal, moved inside the image where it would cross an edge
    tops = [min(max(int(f * h) - side // 2, 0), h - side) for f in fr]
    lefts = [min(max(int(f * w) - side // 2, 0), w - side) for f in fr]
    return [img[t:t + side, x:x + side] for t, x in zip(tops, lefts)]


def make_demo(root: str | os.PathLike[str], *, side: int = 96, per_image: int = 2, seed: int = 0,
              samples: str | os.PathLike[str] = SAMPLES_DIR) -> DemoSet:
    """Write the demo dataset under ``root`` (created; its three subfolders must not exist).

    Args:
        root: the folder to write into.
        side: patch side in pixels (``32`` to the smaller sample's shorter side).
        per_image: patches per sample photo (``>= 1``): the demo has ``per_image × photos`` pairs.
        seed: the noise's seed.
        samples: the folder of photos (``*.png``, sorted by name).

    Returns:
        :class:`DemoSet` (file names ``<photo>-<k>.png``).

    Raises:
        ValueError: a bad ``side``/``per_image``, no photos, or existing output folders.
    """
    if isinstance(side, bool) or not isinstance(side, int) or side < 32:
        raise ValueError(f"side must be an integer >= 32, got {side!r}")
    if isinstance(per_image, bool) or not isinstance(per_image, int) or per_image < 1:
        raise ValueError(f"per_image must be an integer >= 1, got {per_image!r}")
    photos = sorted(Path(samples).glob("*.png"))
    if not photos:
        raise ValueError(f"no *.png photos in {str(samples)!r}")
    root = Path(root)
    dirs = [root / f for f in FOLDERS]
    for d in dirs:
        if d.exists():
            raise ValueError(f"{d} exists already")
    for d in dirs:
        d.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    names = []
    for photo in photos:
        img = load_image(photo, max_side=None).array
        for k, patch in enumerate(_patches(img, side, per_image)):
            name = f"{photo.stem}-{k}.png"
            blur = distortions.gaussian_blur(patch, BLUR_SIGMA)
            moved = distortions.gaussian_noise(distortions.shift(patch, *SHIFT, boundary="reflect"), NOISE_SIGMA,
                                               seed=rng)
            for d, arr in zip(dirs, (patch, blur, moved)):
                (d / name).write_bytes(image_to_png_bytes(arr))
            names.append(name)
    return DemoSet(dirs[0], {FOLDERS[1]: dirs[1], FOLDERS[2]: dirs[2]}, tuple(names))
