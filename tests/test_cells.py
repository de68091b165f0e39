"""``lpips_core.cells.number``: the one way the project writes a number as text."""

from __future__ import annotations

import math

import pytest

from lpips_core.cells import number


def test_decimals_and_significant_digits():
    assert number(1.19113) == "1.1911"
    assert number(1.19105, 3) == "1.191"
    assert number(0.0) == "0.0000"
    assert number(0.000581, 2, significant=True) == "0.00058"
    assert number(5.8e-5, 2, significant=True) == "5.8e-5"
    assert number(5.8e-5, 2, significant=True, short_exponent=False) == "5.8e-05"
    assert number(123456789.0, 6, significant=True) == "1.23457e8"


def test_what_is_not_a_finite_number():
    assert number(None) == "—"
    assert number(math.nan, none="n/a") == "n/a"
    assert number(math.inf) == "∞"
    assert number(-math.inf, significant=True) == "−∞"


def test_the_same_value_reads_the_same_wherever_it_is_shown():
    """A pair's LPIPS in a sentence and in its map's title: one call, one text."""
    value = 1.191049  # "1.1910" at four decimals, though 1.19105 would round up
    assert number(value) == number(float(value)) == "1.1910"


def test_digits_are_checked():
    with pytest.raises(ValueError, match="at least 1"):
        number(1.0, 0, significant=True)
    with pytest.raises(ValueError, match="at least 0"):
        number(1.0, -1)
