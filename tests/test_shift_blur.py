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
    out = shift_blur.sweep(alex, ref, "shift", (0, 1, 3), maps_at=(3,))  # the model's own spec
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
    # the same, by name
    again = shift_blur.sweep(alex, ref, "shift", (0, 1, 3), spec="lpips-alex-0.1-lin", maps_at=(3,))
    assert again["total"] == out["total"] and again["layer_names"] == out["layer_names"]
    np.testing.assert_array_equal(again["maps"], out["maps"])
    with pytest.raises(AssertionError, match="must not run"):  # another image: another key
        shift_blur.sweep(alex, ref[::-1].copy(), "shift", (0, 1, 3), maps_at=(3,))


def test_sweep_blur_without_disk(alex, tmp_path, monkeypatch):
    monkeypatch.setenv("LPIPS_EXPLORER_SWEEP_CACHE", "off")
    assert shift_blur.cache_dir() is None
    ref = synth.texture_patch(1, size=64)
    out = shift_blur.sweep(alex, ref, "blur", (1.5,))
    assert out["maps"] is None
    assert out["total"][0] == pytest.approx(float(lpips_many(alex, ref, [gaussian_blur(ref, 1.5)]).total[0]), rel=1e-5)


def test_sweep_errors(alex):
    ref = synth.texture_patch(0, size=64)
    with pytest.raises(TypeError, match=r"LPIPS · VGG16 needs its own model"):
        shift_blur.sweep(alex, ref, "shift", (1,), spec="lpips-vgg", use_disk=False)
    with pytest.raises(ValueError, match="kind"):
        shift_blur.sweep(alex, ref, "rotate", (1,))
    with pytest.raises(ValueError, match="maps_at"):
        shift_blur.sweep(alex, ref, "shift", (0, 1), maps_at=(2,), use_disk=False)
    with pytest.raises(ValueError, match="at least one"):
        shift_blur.sweep(alex, ref, "shift", ())


def test_swept_value_reads_the_lesson_sweeps_from_disk_only(alex, tmp_path, monkeypatch):
    """The page's numbers for a slider value on the lesson's grid come from a cached sweep (with or
    without maps) and equal a single pass; nothing is computed when nothing is cached."""
    monkeypatch.setenv("LPIPS_EXPLORER_SWEEP_CACHE", str(tmp_path))
    ref = synth.texture_patch(2, size=64)
    assert shift_blur.swept_value(alex, ref, "shift", 2.0) is None  # nothing cached yet
    assert shift_blur.swept_value(alex, ref, "blur", 0.0) == 0.0
    shift_blur.sweep(alex, ref, "shift", shift_blur.SHIFTS, maps_at=shift_blur.MAP_SHIFTS)
    shift_blur.sweep(alex, ref, "blur", shift_blur.SIGMAS)
    single = {("shift", 2.0): shift(ref, 2.0, boundary="reflect"), ("blur", 1.5): gaussian_blur(ref, 1.5)}
    for (kind, value), img in single.items():
        want = float(lpips_many(alex, ref, [img]).total[0])
        assert shift_blur.swept_value(alex, ref, kind, value) == pytest.approx(want, abs=1e-6)
    assert shift_blur.swept_value(alex, ref, "blur", 1.25) is None  # not on the grid
    assert shift_blur.swept_value(alex, ref[::-1].copy(), "shift", 2.0) is None  # another image
    monkeypatch.setenv("LPIPS_EXPLORER_SWEEP_CACHE", "off")
    assert shift_blur.swept_value(alex, ref, "shift", 2.0) is None
    with pytest.raises(ValueError, match="kind"):
        shift_blur.swept_value(alex, ref, "rotate", 1.0)


def test_lesson_sweeps_cache_what_the_page_reads(alex, tmp_path, monkeypatch):
    """``lesson_sweeps`` (what ``python -m lpips_explorer.shift_blur`` runs at set-up) writes the
    sweeps under the keys the page reads: every point of both sweeps comes back from disk, and the
    explained spec's shift sweep holds its maps."""
    monkeypatch.setenv("LPIPS_EXPLORER_SWEEP_CACHE", str(tmp_path))
    ref = synth.texture_patch(4, size=64)
    shift_blur.lesson_sweeps(ref, {"lpips-alex": alex}, sigma=1.5)
    assert len(list(tmp_path.glob("*.npz"))) == 3  # shift (with maps), blur, the explained blur at σ = 1.5
    for kind, values in (("shift", shift_blur.SHIFTS), ("blur", shift_blur.SIGMAS)):
        assert all(shift_blur.swept_value(alex, ref, kind, v) is not None for v in values)

    def boom(*a, **k):
        raise AssertionError("a cached sweep must not run the network")

    monkeypatch.setattr(shift_blur, "metric_many", boom)
    maps = shift_blur.sweep(alex, ref, "shift", shift_blur.SHIFTS, maps_at=shift_blur.MAP_SHIFTS)["maps"]
    assert maps.shape[:2] == (len(shift_blur.MAP_SHIFTS), 5)
