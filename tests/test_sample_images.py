"""Tests for sample_images/: the committed photographs, their README and their generator."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "sample_images"
FILES = sorted(FOLDER.glob("*.png"))


def _script():
    spec = importlib.util.spec_from_file_location("make_sample_images", REPO / "scripts" / "make_sample_images.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_four_to_six_images_modest_total():
    assert 4 <= len(FILES) <= 6, FILES
    assert sum(p.stat().st_size for p in FILES) < 2.5e6


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_image_is_rgb_8bit_at_most_512(path):
    with Image.open(path) as im:
        assert im.format == "PNG"
        assert im.mode == "RGB"  # 8 bits per channel
        assert max(im.size) <= 512 and min(im.size) >= 64
        assert np.asarray(im).dtype == np.uint8


def test_readme_names_each_file_and_source():
    text = (FOLDER / "README.md").read_text(encoding="utf-8")
    sources = _script().SOURCES
    assert sorted(f"{name}.png" for name in sources) == [p.name for p in FILES]
    for name, function in sources.items():
        assert f"`{name}.png`" in text
        assert f"skimage.data.{function}()" in text
    for path in FILES:
        with Image.open(path) as im:
            assert f"{im.size[0]} × {im.size[1]}" in text, path.name


def test_script_reproduces_committed_pixels():
    module = _script()
    for name in ("chelsea", "brick"):  # one colour, one greyscale; the rest take the same path
        regenerated = np.asarray(module.load(name))
        with Image.open(FOLDER / f"{name}.png") as im:
            np.testing.assert_array_equal(regenerated, np.asarray(im))
    brick = np.asarray(module.load("brick"))
    np.testing.assert_array_equal(brick[:, :, 0], brick[:, :, 2])  # grey replicated
