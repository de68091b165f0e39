"""How the lessons and the app write sizes and signed numbers (pure text, no imports beyond the standard library).

One format for every image size the app shows, width first: ``"256×170 px"``, labelled
``"256×170 px (width×height)"`` where a reader meets it first. NumPy shapes are ``(H, W)``, so
pass ``size_text(w, h)`` or ``size_hw(shape[:2])``. :mod:`ui.text` re-exports these for the pages;
:mod:`lpips_explorer.diagnostics` uses them directly (it may not import :mod:`ui`).
"""

from __future__ import annotations

import html
import math
import numbers
from typing import Sequence

from lpips_core.cells import number

__all__ = ["SIZE_LABEL", "distance_text", "plotly_escape", "significant", "signed", "size_hw", "size_text"]

#: What the two numbers of a size are, in the order :func:`size_text` writes them.
SIZE_LABEL = "width×height"


def _side(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be an integer number of pixels, got {value!r}")
    side = int(value)
    if side != value or side < 0:
        raise ValueError(f"{what} must be a non-negative integer number of pixels, got {value!r}")
    return side


def size_text(width: int, height: int, *, labelled: bool = False, unit: str = "px") -> str:
    """An image size as the app writes it: ``"256×170 px"``, width first.

    Args:
        width, height: pixels (non-negative integers; NumPy integers and integral floats too).
        labelled: append ``" (width×height)"`` (for the first size a page or a sentence shows).
        unit: what the numbers count (``""`` for a feature map's grid of positions: ``"31×20"``).

    Raises:
        TypeError: a side that is not a number. ValueError: a negative or fractional side.

    Example:
        >>> size_text(256, 170, labelled=True)
        '256×170 px (width×height)'
    """
    text = f"{_side(width, 'width')}×{_side(height, 'height')}" + (f" {unit}" if unit else "")
    return f"{text} ({SIZE_LABEL})" if labelled else text


def size_hw(hw: Sequence[int], *, labelled: bool = False, unit: str = "px") -> str:
    """:func:`size_text` of a NumPy-ordered ``(H, W)`` pair (``array.shape[:2]``).

    Example:
        >>> size_hw((170, 256))
        '256×170 px'
    """
    if len(hw) != 2:
        raise ValueError(f"hw must be (height, width), got {tuple(hw)!r}")
    return size_text(hw[1], hw[0], labelled=labelled, unit=unit)


def significant(value: float, digits: int = 2) -> str:
    """``value`` to ``digits`` significant digits, so a small non-zero value never reads as zero:
    ``0.00058``, ``5.8e-5`` (a short exponent), ``0.12``, ``31``; ``"0"`` for zero, ``"∞"``/``"−∞"``
    and ``"n/a"`` (``None``, NaN) otherwise.

    Example:
        >>> significant(0.000581), significant(5.8e-5), significant(0.1234), significant(0.0)
        ('0.00058', '5.8e-5', '0.12', '0')
    """
    return number(value, digits, significant=True, none="n/a")


def distance_text(value: float) -> str:
    """A distance (an LPIPS value, a diversity) as the app writes it wherever it shows one: four
    decimals, ``"0.7614"``. One function for every place, so that the same number shown twice
    (a pair's LPIPS in a sentence and in its map's title) agrees to the last digit;
    ``"n/a"`` for ``None`` or NaN.

    Example:
        >>> distance_text(1.19113), distance_text(0.0)
        ('1.1911', '0.0000')
    """
    return number(value, 4, none="n/a")


def signed(value: float, digits: int = 1, *, unit: str = "") -> str:
    """A signed number, ``"+2.1"`` / ``"-0.3"``, and ``"0"`` when it rounds to zero at ``digits``
    decimals (never ``"+0.0"`` or ``"-0.0"``); ``unit`` is appended after a space.
    ``"n/a"`` for ``None`` or a non-finite value.

    Example:
        >>> signed(2.06, unit="px"), signed(-0.04, unit="px"), signed(-0.0412, 4)
        ('+2.1 px', '0 px', '-0.0412')
    """
    suffix = f" {unit}" if unit else ""
    if value is None or not math.isfinite(value):
        return "n/a"
    text = f"{value:+.{digits}f}"
    return ("0" if float(text) == 0 else text) + suffix


def plotly_escape(text: object) -> str:
    """``text`` as a Plotly label that shows literally: ``&``, ``<`` and ``>`` as HTML entities.

    Plotly reads a subset of HTML in trace names (the legend), hover text, titles, annotations
    and axis labels: a file named ``<a href="…">x</a>`` would be a link there and ``<b>`` bold.
    Every string not written by the app (a file or folder name) goes through this before it reaches
    a figure. Quotes stay as they are (outside a tag they are text, and Plotly knows no ``&quot;``).

    Example:
        >>> plotly_escape('<a href="x">a & b</a>')
        '&lt;a href="x"&gt;a &amp; b&lt;/a&gt;'
    """
    return html.escape(str(text), quote=False)
