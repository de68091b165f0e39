"""The demo dataset (lpips_explorer.demo_dataset) and the two-method comparison (lpips_core.datasets.methods)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lpips_explorer import distortions
from lpips_explorer.demo_dataset import BLUR_SIGMA, make_demo
from lpips_core.datasets.methods import compare_methods, higher_is_better, same_ranking
from lpips_core.images import load_image


def test_demo_is_deterministic_and_its_files_are_what_the_doc_says(tmp_path):
    one = make_demo(tmp_path / "one", side=48, per_image=1)
    two = make_demo(tmp_path / "two", side=48, per_image=1)
    assert one.names == ("astronaut-0.png", "brick-0.png", "chelsea-0.png", "coffee-0.png", "grass-0.png",
                         "rocket-0.png")
    for folder in ("reference", "A-blur", "B-shift-noise"):
        for n in one.names:
            assert (tmp_path / "one" / folder / n).read_bytes() == (tmp_path / "two" / folder / n).read_bytes()
    ref = load_image(one.reference / "brick-0.png").array
    blur = load_image(one.methods["A-blur"] / "brick-0.png").array
    assert ref.shape == (48, 48, 3)
    want = np.round(distortions.gaussian_blur(ref, BLUR_SIGMA) * 255) / 255
    assert np.abs(blur - want).max() <= 1 / 255 + 1e-6  # the blur of the (8-bit) reference patch
    with pytest.raises(ValueError, match="exists already"):
        make_demo(tmp_path / "one")
    with pytest.raises(ValueError, match="side must be an integer >= 32, got 8"):
        make_demo(tmp_path / "x", side=8)


def test_demo_patches_are_whole_squares_near_the_edges(tmp_path):
    """A patch that would cross an image's edge (256 px at a quarter of a 300 px side) moves
    inside it: every file is side × side; the default 96-px patches are where they always were
    (the centred crop at the diagonal's points)."""
    big = make_demo(tmp_path / "big", side=256, per_image=2)
    for folder in (big.reference, *big.methods.values()):
        assert {load_image(folder / n).size for n in big.names} == {(256, 256)}
    small = make_demo(tmp_path / "small")
    from lpips_explorer.demo_dataset import SAMPLES_DIR

    chelsea = load_image(SAMPLES_DIR / "chelsea.png").array  # 300 × 451
    h, w = chelsea.shape[:2]
    top, left = int(0.25 * h) - 48, int(0.25 * w) - 48
    want = np.round(chelsea[top:top + 96, left:left + 96] * 255) / 255
    assert np.abs(load_image(small.reference / "chelsea-0.png").array - want).max() <= 1e-6


def _rows(values: dict[str, list[float]], errors=()) -> list[dict]:
    n = len(next(iter(values.values())))
    return [{"key": f"k{i}", "error_kind": "unreadable" if i in errors else "",
             **{m: v[i] for m, v in values.items()}} for i in range(n)]


def test_compare_methods_equals_scipy_on_the_paired_difference():
    rng = np.random.default_rng(3)
    a = {"mse": rng.random(9).tolist(), "psnr": (20 + rng.random(9)).tolist()}
    b = {"mse": (np.array(a["mse"]) + 0.3 + 0.01 * rng.standard_normal(9)).tolist(),
         "psnr": (np.array(a["psnr"]) + 0.1 * rng.standard_normal(9)).tolist()}
    b["psnr"][4] = float("inf")  # non-finite: left out of that metric only
    comp = compare_methods(_rows(a), _rows(b, errors={8}), ["mse", "psnr"], labels=("A", "B"))
    d = np.array(a["mse"][:8]) - np.array(b["mse"][:8])
    lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    assert comp[0]["n"] == 8 and comp[0]["diff"] == pytest.approx(d.mean(), rel=1e-12)
    assert comp[0]["ci95"] == pytest.approx([lo, hi], rel=1e-10)
    assert comp[0]["better"] == "A" and comp[0]["clear"] and not comp[0]["higher_is_better"]
    assert comp[1]["n"] == 7 and comp[1]["higher_is_better"]
    assert higher_is_better("ssim") and not higher_is_better("lpips-alex") and not higher_is_better("dists")
    assert same_ranking([{"better": "A"}, {"better": "A"}]) and not same_ranking([{"better": "A"}, {"better": "B"}])
