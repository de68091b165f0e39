"""lpips_explorer.shift_blur: the lesson's sweeps equal the library's values, and come back from disk."""

from __future__ import annotations

import numpy as np
import pytest

from lpips_explorer import shift_blur, synth
from lpips_explorer.distortions import gaussian_blur, shift
from lpips_explorer.figures.lessons import block_mean
from lpips_core.model import LPIPS
from lpips_core.sweeps import lpips_many


@pytest.fixture(scope="module")
def alex():
    return LPIPS("alex")


def test_sweep_values_maps_and_disk_cache(alex, tmp_path, monkeypatch):
    monkeypatch.setenv("LPIPS_EXPLORER_SWEEP_CACHE", str(tmp_path))
    ref = synth.texture_patch(0, size=64)
    out = shift_blur.sweep(alex, ref, "shift", (0, 1, 3), metric="lpips", maps_at=(3,))
    res = lpips_many(alex, ref, [shift(ref, v, boundary="reflect") for v in (1, 3)], spatial=True)
    assert out["total"][0] == 0.0 and out["per_layer"][0].tolist() == [0.0] * len(res.layer_names)
    np.testing.assert_allclose(out["total"][1:], res.total.numpy(), rtol=1e-5)
    np.testing.assert_allclose(out["per_layer"][1:], res.per_layer.numpy(), rtol=1e-5)
    assert out["layer_names"] == list(res.layer_names)
    np.testing.assert_allclose(out["maps"][0], block_mean(res.layer_maps[1].double().numpy(), 48), rtol=1e-5)
    assert len(list(tmp_path.glob("*.npz"))) == 1

    def boom(*a, **k):
        raise AssertionError("a cached sweep must not run the network")

    monkeypatch.setattr(shift_blur, "metric_many", boom)
    again = shift_blur.sweep(alex, ref, "shift", (0, 1, 3), metric="lpips", maps_at=(3,))
    assert again["total"] == out["total"] and again["layer_names"] == out["layer_names"]
    np.testing.assert_array_equal(again["maps"], out["maps"])
    with pytest.raises(AssertionError, match="must not run"):  # another image: another key
        shift_blur.sweep(alex, ref[::-1].copy(), "shift", (0, 1, 3), metric="lpips", maps_at=(3,))


def test_sweep_blur_without_disk(alex, tmp_path, monkeypatch):
    monkeypatch.setenv("LPIPS_EXPLORER_SWEEP_CACHE", "off")
    assert shift_blur.cache_dir() is None
    ref = synth.texture_patch(1, size=64)
    out = shift_blur.sweep(alex, ref, "blur", (1.5,), metric="lpips")
    assert out["maps"] is None
    assert out["total"][0] == pytest.approx(float(lpips_many(alex, ref, [gaussian_blur(ref, 1.5)]).total[0]), rel=1e-5)


def test_sweep_errors(alex):
    ref = synth.texture_patch(0, size=64)
    with pytest.raises(ValueError, match="kind"):
        shift_blur.sweep(alex, ref, "rotate", (1,), metric="lpips")
    with pytest.raises(ValueError, match="maps_at"):
        shift_blur.sweep(alex, ref, "shift", (0, 1), metric="lpips", maps_at=(2,), use_disk=False)
    with pytest.raises(ValueError, match="at least one"):
        shift_blur.sweep(alex, ref, "shift", (), metric="lpips")


def test_swept_value_reads_the_lesson_sweeps_from_disk_only(alex, tmp_path, monkeypatch):
    """The page's numbers for a slider value on the lesson's grid come from a cached sweep (with or
    without maps) and equal a single pass; nothing is computed when nothing is cached."""
    monkeypatch.setenv("LPIPS_EXPLORER_SWEEP_CACHE", str(tmp_path))
    ref = synth.texture_patch(2, size=64)
    assert shift_blur.swept_value(alex, ref, "shift", 2.0, metric="lpips") is None  # nothing cached yet
    assert shift_blur.swept_value(alex, ref, "blur", 0.0, metric="lpips") == 0.0
    shift_blur.sweep(alex, ref, "shift", shift_blur.SHIFTS, metric="lpips", maps_at=shift_blur.MAP_SHIFTS)
    shift_blur.sweep(alex, ref, "blur", shift_blur.SIGMAS, metric="lpips")
    single = {("shift", 2.0): shift(ref, 2.0, boundary="reflect"), ("blur", 1.5): gaussian_blur(ref, 1.5)}
    for (kind, value), img in single.items():
        want = float(lpips_many(alex, ref, [img]).total[0])
        assert shift_blur.swept_value(alex, ref, kind, value, metric="lpips") == pytest.approx(want, abs=1e-6)
    assert shift_blur.swept_value(alex, ref, "blur", 1.25, metric="lpips") is None  # not on the grid
    assert shift_blur.swept_value(alex, ref[::-1].copy(), "shift", 2.0, metric="lpips") is None  # another image
    monkeypatch.setenv("LPIPS_EXPLORER_SWEEP_CACHE", "off")
    assert shift_blur.swept_value(alex, ref, "shift", 2.0, metric="lpips") is None
    with pytest.raises(ValueError, match="kind"):
        shift_blur.swept_value(alex, ref, "rotate", 1.0, metric="lpips")
