"""lpips_explorer.text: the one way sizes, signed numbers and small values are written (and ui.text's
re-export of it, which the pages use)."""

from __future__ import annotations

import base64
import io
import math
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lpips_explorer.text import SIZE_LABEL, distance_text, significant, signed, size_hw, size_text

REPO = Path(__file__).resolve().parents[1]


def test_size_text_is_width_first_and_labelled_on_request():
    assert size_text(256, 170) == "256×170 px"
    assert size_text(256, 170, labelled=True) == "256×170 px (width×height)" == f"256×170 px ({SIZE_LABEL})"
    assert size_text(np.int64(64), 48.0) == "64×48 px"  # NumPy integers and integral floats
    assert size_hw((170, 256)) == "256×170 px"  # a NumPy shape is (H, W)
    assert size_hw(np.zeros((170, 256, 3)).shape[:2], labelled=True) == "256×170 px (width×height)"
    assert size_hw((20, 31), unit="") == "31×20"  # a feature map's grid of positions


@pytest.mark.parametrize("bad, error, match", [
    ((-1, 4), ValueError, "width must be a non-negative integer number of pixels, got -1"),
    ((4, 2.5), ValueError, "height must be a non-negative integer number of pixels, got 2.5"),
    (("4", 4), TypeError, "width must be an integer number of pixels, got '4'"),
    ((True, 4), TypeError, "width must be an integer number of pixels, got True"),
])
def test_size_text_refuses_what_is_not_a_size(bad, error, match):
    with pytest.raises(error, match=re.escape(match)):
        size_text(*bad)
    with pytest.raises(ValueError, match=re.escape("hw must be (height, width), got (1, 2, 3)")):
        size_hw((1, 2, 3))


@pytest.mark.parametrize("value, digits, unit, text", [
    (2.06, 1, "px", "+2.1 px"),
    (-3.0, 1, "px", "-3.0 px"),
    (0.0, 1, "px", "0 px"),
    (-0.0, 1, "px", "0 px"),       # -dy of a zero offset: ":+.1f" writes "-0.0"
    (-0.04, 1, "px", "0 px"),      # rounds to zero at one decimal
    (0.049, 1, "", "0"),
    (-0.07408, 4, "", "-0.0741"),
    (0.00004, 4, "", "0"),
    (float("nan"), 4, "", "n/a"),
    (None, 4, "", "n/a"),
])
def test_signed_never_writes_a_signed_zero(value, digits, unit, text):
    assert signed(value, digits, unit=unit) == text


@pytest.mark.parametrize("value, text", [
    (0.000581, "0.00058"), (5.8e-5, "5.8e-5"), (1.25e-7, "1.2e-7"), (0.1234, "0.12"), (31.4, "31"),
    (0.0, "0"), (float("inf"), "∞"), (float("-inf"), "−∞"), (float("nan"), "n/a"), (None, "n/a"),
])
def test_significant_keeps_small_values_readable(value, text):
    assert significant(value) == text
    if value is not None and math.isfinite(value) and value:
        assert float(significant(value)) == pytest.approx(value, rel=0.05)  # never "0.00" for a non-zero value
    with pytest.raises(ValueError, match="digits must be at least 1, got 0"):
        significant(1.0, 0)


@pytest.mark.parametrize("value, text", [
    (1.19113, "1.1911"), (0.76137, "0.7614"), (0.0, "0.0000"), (2.0, "2.0000"), (float("nan"), "n/a"), (None, "n/a"),
])
def test_distance_text_writes_every_distance_the_same_way(value, text):
    assert distance_text(value) == text


def test_the_space_page_writes_its_distances_through_one_function():
    """LPIPS space shows a pair's LPIPS in a sentence and in its map's title, and the diversity in a
    metric and on its scale: each through distance_text, never an f-string's own ``:.4f``."""
    page = (REPO / "app_pages" / "lpips_space.py").read_text()
    assert ":.4f}" not in page and page.count("distance_text(") >= 6


def test_the_pages_get_the_same_functions_and_a_lossless_image_url():
    import ui.text

    assert ui.text.size_text is size_text and ui.text.size_hw is size_hw and ui.text.signed is signed
    assert ui.text.significant is significant and ui.text.distance_text is distance_text
    img = np.random.default_rng(0).random((5, 7, 3)).astype(np.float32)
    url = ui.text.png_data_url(img)
    assert url.startswith("data:image/png;base64,")
    decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    np.testing.assert_array_equal(decoded, np.rint(img * 255).astype(np.uint8))


def test_no_page_writes_a_size_by_hand():
    """Every size a page or ui/ writes goes through size_text/size_hw: no ``{h}×{w}`` f-string,
    no "(H×W)" label left (sizes are width first everywhere)."""
    hand = re.compile(r"\}×\{|\} ?x ?\{|H×W|\(H, W\) px")
    offenders = [f"{p.relative_to(REPO)}:{n}: {line.strip()}"
                 for folder in ("app_pages", "ui") for p in sorted((REPO / folder).glob("*.py"))
                 for n, line in enumerate(p.read_text().splitlines(), 1) if hand.search(line)]
    assert offenders == []
