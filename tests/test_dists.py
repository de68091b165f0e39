"""DISTS against the reference ``DISTS-pytorch`` 0.1 package, and its purpose.

The oracle is the package's ``DISTS`` module, built without its ImageNet download (its call to
torchvision's ``vgg16(pretrained=True)`` is patched to return untrained VGG16 ``features``) and then given the same
VGG16 weights as ours (:func:`lpips_core.weights.load_backbone_weights`) and the α, β of the
wheel's ``weights.pt``, exactly as its ``load_weights=True`` branch assigns them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from lpips_core import LPIPS
from lpips_core.conventions import to_input
from lpips_core.dists import DISTS, STAGE_NAMES
from lpips_explorer.distortions import gaussian_blur, gaussian_noise, shift
from lpips_core.testing import reference_dists
from lpips_core.weights import WeightsUnavailable, load_backbone_weights

REPO = Path(__file__).resolve().parents[1]
SIZES = [(64, 64), (97, 131)]


def photo(name: str) -> np.ndarray:
    with Image.open(REPO / "sample_images" / f"{name}.png") as im:
        return np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0


def parity_pairs(golden, h: int, w: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Three pairs at ``(h, w)`` in ``[0, 1]``: ex_ref against ex_p0 and ex_p1 (the reference
    repository's examples), and a photograph against a blurred, noisy copy."""
    coffee = photo("coffee")[:256, 128:384]
    other = gaussian_noise(gaussian_blur(shift(coffee, 2, 0, boundary="reflect"), 1.0), 0.03, seed=1)
    x = torch.cat([to_input(a, convention="[0,1]", size=(h, w)) for a in (golden["ex_ref"], golden["ex_ref"], coffee)])
    y = torch.cat([to_input(b, convention="[0,1]", size=(h, w)) for b in (golden["ex_p0"], golden["ex_p1"], other)])
    return x, y


@pytest.fixture(scope="module")
def vgg_sd() -> dict[str, torch.Tensor]:
    return load_backbone_weights("vgg").state_dict


@pytest.fixture(scope="module")
def model(vgg_sd) -> DISTS:
    return DISTS(device="cpu", backbone_state_dict=vgg_sd)


@pytest.fixture(scope="module")
def oracle(vgg_sd):
    return reference_dists(vgg_sd)


# ----------------------------------------------------------------------------- parity
def test_parity_with_reference_package(golden, model, oracle):
    """Totals equal the reference's to 1e-5 absolute: three pairs at 64×64 and 97×131 in the
    correct [0, 1] convention, and at 64 px also in LPIPS's [-1, 1], the likely mistake (both
    models must treat any input alike). Measured: ≤ 2e-7. The reference exposes no per-stage
    terms; ours are checked to add up to its total."""
    for h, w in SIZES:
        x01, y01 = parity_pairs(golden, h, w)
        for scale, offset in [(1.0, 0.0)] + ([(2.0, -1.0)] if h == 64 else []):
            x, y = x01 * scale + offset, y01 * scale + offset
            got = model.compare(x, y)
            with torch.no_grad():
                want = oracle(x, y).flatten()
            ctx = f"{h}x{w} scale={scale}"
            np.testing.assert_allclose(got.total, want, atol=1e-5, rtol=0, err_msg=ctx)
            np.testing.assert_allclose(got.components["texture"].sum(1) + got.components["structure"].sum(1), want, atol=1e-5, rtol=0, err_msg=ctx)
            if scale != 1.0:  # model(x, y) checks the range: the mistake is refused with the fix
                with pytest.raises(ValueError, match=r"expects x in \[0, 1\].*\(x \+ 1\) / 2"):
                    model(x, y)
            else:  # DISTS takes [0, 1]: normalize=True changes nothing
                np.testing.assert_allclose(model(x, y), want, atol=1e-5, rtol=0, err_msg=ctx)
                np.testing.assert_allclose(model(x, y, normalize=True), want, atol=1e-5, rtol=0, err_msg=ctx)


# ----------------------------------------------------------------------------- properties
def test_stage_terms_sum_to_total_and_are_non_negative(golden, model):
    """``D = Σ_i (T_i + S_i)`` because α and β sum to one; each term is a weighted ``1 − l`` or
    ``1 − s`` with ``l, s ≤ 1``, hence non-negative."""
    x = to_input(golden["ex_ref"], convention="[0,1]")
    y = torch.cat([to_input(golden["ex_p0"], convention="[0,1]"), to_input(golden["ex_p1"], convention="[0,1]")])
    res = model.compare(x, y)
    assert res.components["texture"].shape == res.components["structure"].shape == (2, 6)
    assert res.layer_names == STAGE_NAMES == ("input", "relu1_2", "relu2_2", "relu3_3", "relu4_3", "relu5_3")
    np.testing.assert_allclose(res.per_layer.sum(1), res.total, atol=1e-6)
    assert float(res.components["texture"].min()) >= -1e-7 and float(res.components["structure"].min()) >= -1e-7
    assert float(model.alpha.sum() + model.beta.sum()) == pytest.approx(1.0, abs=1e-6)


def test_attributes_and_provenance(model):
    assert model.input_range == "[0,1]"
    assert model.weights == "VGG16: injected; alpha/beta: DISTS-pytorch 0.1 (weights.pt)"
    resolved = DISTS(device="cpu")
    assert resolved.weights.startswith(f"VGG16: {load_backbone_weights('vgg').source}")
    model.train()
    assert not model.training and not any(p.requires_grad for p in model.parameters())


def test_device_placement(device, vgg_sd, model):
    on = DISTS(device=device, backbone_state_dict=vgg_sd)
    x = torch.rand(2, 3, 64, 64)
    y = x.roll(1, -1)
    assert on(x, y).device.type == device
    np.testing.assert_allclose(on.compare(x, y).total, model.compare(x, y).total, atol=1e-5)


# ----------------------------------------------------------------------------- errors
def test_missing_alpha_beta_says_how_to_fix(tmp_path, vgg_sd):
    with pytest.raises(WeightsUnavailable, match="pip install --no-deps DISTS-pytorch==0.1"):
        DISTS(backbone_state_dict=vgg_sd, alpha_beta=tmp_path / "nothing.pt")


# ----------------------------------------------------------------------------- the point of it
@pytest.fixture(scope="module")
def lpips_vgg(vgg_sd) -> LPIPS:
    return LPIPS("vgg", device="cpu", backbone_state_dict=vgg_sd)


# brick in the fast tier; grass (the same experiment on another photo) in the full tier
@pytest.mark.parametrize("texture", [pytest.param("grass", marks=pytest.mark.slow), "brick"])
def test_resampled_texture_costs_a_smaller_fraction_of_a_blur_than_with_lpips(texture, model, lpips_vgg):
    """Ding et al.'s motivation, on the sample textures: another window of the same texture
    (top-left against bottom-right 128 × 128 crop), relative to a visible blur (σ = 2 px) of the
    first window, costs DISTS less than it costs LPIPS on the same VGG16.

    Measured d(other window)/d(blur): grass DISTS 0.77 vs LPIPS-vgg 0.93; brick 1.24 vs 1.92.
    """
    img = photo(texture)
    a, b, blurred = img[:128, :128], img[-128:, -128:], gaussian_blur(img, 2.0)[:128, :128]
    ref = to_input(a, convention="[0,1]")
    others = torch.cat([to_input(b, convention="[0,1]"), to_input(blurred, convention="[0,1]")])
    d = model.compare_batch(ref, others).total
    lp = lpips_vgg.compare_batch(ref * 2 - 1, others * 2 - 1).total
    assert float(d[0] / d[1]) < float(lp[0] / lp[1]), (d.tolist(), lp.tolist())
