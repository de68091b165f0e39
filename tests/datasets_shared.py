"""Small generated image folders for the dataset tests (64 px, written as PNG/JPEG files)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def image(rng: np.random.Generator, h: int = 64, w: int = 64) -> np.ndarray:
    """A smooth random RGB image (uint8): low-frequency noise upsampled, so the metrics are not degenerate."""
    small = rng.random((h // 8 + 1, w // 8 + 1, 3))
    big = np.asarray(Image.fromarray((small * 255).astype(np.uint8)).resize((w, h), Image.BILINEAR), dtype=np.float64)
    return np.clip(big + rng.normal(0, 6, big.shape), 0, 255).astype(np.uint8)


def distort(rng: np.random.Generator, img: np.ndarray, strength: float) -> np.ndarray:
    return np.clip(img.astype(np.float64) + rng.normal(0, strength, img.shape), 0, 255).astype(np.uint8)


def save(arr: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path)


def make_pairs(root: Path, n: int = 8, *, seed: int = 0, odd_size: int = 2) -> tuple[Path, Path]:
    """``root/a`` and ``root/b`` with ``n`` pairs named ``p00`` …: a third in ``sub/``, B's
    every third as JPEG, the last ``odd_size`` pairs 48 x 56 px (another size bucket)."""
    rng = np.random.default_rng(seed)
    a_dir, b_dir = root / "a", root / "b"
    for i in range(n):
        h, w = (48, 56) if i >= n - odd_size else (64, 64)
        a = image(rng, h, w)
        b = distort(rng, a, 4 + 6 * i)
        sub = "sub/" if i % 3 == 1 else ""
        save(a, a_dir / f"{sub}p{i:02d}.png")
        save(b, b_dir / f"{sub}p{i:02d}.{'jpg' if i % 3 == 0 else 'png'}")
    return a_dir, b_dir


def assert_same_rows(got: list[dict], want: list[dict], metrics: list[str], *, atol: float = 1e-6) -> None:
    """The same rows: every column equal, except the metric values, equal within ``atol``.

    For runs whose networks ran on different kernels: a scoring lane (or a Ray actor) runs one
    torch thread, where the large convolutions go to NNPACK; a process on two threads runs them
    on oneDNN. The two agree within ~1e-7, not to the bit (runs on the same kernels do).
    """
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert {k: v for k, v in g.items() if k not in metrics} == {k: v for k, v in w.items() if k not in metrics}
        for name in metrics:
            assert (g[name] is None) == (w[name] is None), (g["key"], name)
            if w[name] is not None:
                assert abs(g[name] - w[name]) <= atol, (g["key"], name, g[name], w[name])
