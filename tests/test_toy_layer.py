"""The toy layer's numbers, computed by the engine's per-layer code.

Golden values from the reference document ``000`` ("Inside one layer"): weights w = (1, 0.6)
on the difference; bottom-right term 1 + 0.36 = 1.36 (unweighted 2 − 2 cos 90° = 2); centre
term ≈ 0.34 for directions 40° apart (unweighted 2 − 2 cos 40° ≈ 0.47); d_l ≈ 0.20.
"""

import math

import numpy as np
import pytest
import torch

from lpips_core import model as engine
from lpips_explorer.toy_layer import TOY_ANGLES, toy_layer


@pytest.fixture(scope="module")
def toy():
    return toy_layer()


def test_bottom_right_term(toy):
    assert toy.terms[2, 2] == pytest.approx(1.36, abs=1e-8)
    assert toy.terms_unweighted[2, 2] == pytest.approx(2.0, abs=1e-8)


def test_centre_term(toy):
    assert toy.angles[1, 1] == pytest.approx(40.0, abs=1e-6)
    assert toy.terms[1, 1] == pytest.approx(0.344, abs=5e-4)
    assert round(float(toy.terms[1, 1]), 2) == 0.34
    assert toy.terms_unweighted[1, 1] == pytest.approx(2 - 2 * math.cos(math.radians(40)), abs=1e-8)
    assert round(float(toy.terms_unweighted[1, 1]), 2) == 0.47


def test_layer_value(toy):
    assert round(toy.d_l, 2) == 0.20
    assert toy.d_l == pytest.approx(float(toy.terms.mean()))
    # the other seven positions nearly agree
    others = np.delete(toy.terms.ravel(), [4, 8])
    assert others.max() < 0.05


def test_features_are_relu_like_and_normalised(toy):
    assert (toy.x_raw >= 0).all() and (toy.y_raw >= 0).all()
    # the raw lengths differ; the normalised ones are 1
    assert np.ptp(np.linalg.norm(toy.x_raw, axis=-1)) > 0.3
    np.testing.assert_allclose(np.linalg.norm(toy.x_hat, axis=-1), 1.0, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(toy.y_hat, axis=-1), 1.0, atol=1e-9)
    for (i, j), (a, b) in TOY_ANGLES.items():
        assert toy.angles[i, j] == pytest.approx(abs(a - b), abs=1e-5)


def test_numbers_come_from_the_engine(toy, monkeypatch):
    """The toy layer must call the engine's layer_term_maps with v = w² (the engine's form)."""
    seen = []
    original = engine.layer_term_maps

    def spy(fx, fy, weights):
        seen.append(None if weights is None else [w.clone() for w in weights])
        return original(fx, fy, weights)

    import lpips_explorer.toy_layer as tl

    monkeypatch.setattr(tl, "layer_term_maps", spy)
    again = tl.toy_layer()
    assert len(seen) == 2
    torch.testing.assert_close(seen[0][0], torch.tensor([1.0, 0.36], dtype=torch.float64))
    assert seen[1] is None
    np.testing.assert_array_equal(again.terms, toy.terms)


def test_other_weights_and_errors():
    flat = toy_layer((1.0, 1.0))
    np.testing.assert_allclose(flat.terms, flat.terms_unweighted)
    with pytest.raises(ValueError, match="non-negative"):
        toy_layer((1.0, -0.5))
    with pytest.raises(ValueError, match="two finite"):
        toy_layer((1.0,))
