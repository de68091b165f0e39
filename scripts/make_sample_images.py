"""Write the sample photographs in ``sample_images/`` from scikit-image's bundled data.

Deterministic and rerunnable: every image comes from a ``skimage.data`` function that reads
a file shipped inside the scikit-image wheel (no download), is reduced with Pillow's Lanczos
filter so that its longer side is at most 512 pixels, greyscale images are replicated to
three channels, and each is saved as an 8-bit RGB PNG.

    .venv/bin/python scripts/make_sample_images.py [OUT_DIR]

``OUT_DIR`` defaults to ``sample_images/`` at the repository root. Credits and licences are
in ``sample_images/README.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import skimage.data
from PIL import Image

MAX_SIDE = 512

#: output file stem -> name of the ``skimage.data`` function it comes from
SOURCES: dict[str, str] = {
    "astronaut": "astronaut",
    "coffee": "coffee",
    "chelsea": "chelsea",
    "rocket": "rocket",
    "brick": "brick",
    "grass": "grass",
}

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "sample_images"


def load(name: str) -> Image.Image:
    """The named ``skimage.data`` image as an RGB Pillow image, longer side <= 512."""
    array = np.asarray(getattr(skimage.data, SOURCES[name])())
    if array.ndim == 2:
        array = np.repeat(array[:, :, None], 3, axis=2)
    image = Image.fromarray(array.astype(np.uint8))
    w, h = image.size
    scale = MAX_SIDE / max(w, h)
    if scale < 1:
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        image = image.resize(size, Image.Resampling.LANCZOS)
    return image


def main(out_dir: Path | str = DEFAULT_OUT) -> list[Path]:
    """Write every sample image to ``out_dir``; return the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SOURCES:
        path = out / f"{name}.png"
        load(name).save(path, format="PNG", optimize=True)
        written.append(path)
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", default=DEFAULT_OUT, type=Path)
    for p in main(parser.parse_args().out_dir):
        with Image.open(p) as im:
            print(f"{p}: {im.size[0]} x {im.size[1]} {im.mode}, {p.stat().st_size} bytes")
