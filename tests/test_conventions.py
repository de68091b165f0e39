"""``lpips_core.conventions.to_input`` against independent computations.

The parity tests feed our model and the reference the same ``to_input`` output, so a fault here
would cancel out there. These tests compute the expected network input without the library:

- resizing with Pillow, one float channel at a time (mode ``"F"``: no 8-bit rounding), as the
  README promises ("antialiased bilinear interpolation (Pillow's BILINEAR) by default");
  bicubic against Pillow's BICUBIC, clipped to ``[0, 1]`` as ours is;
- the range conventions scaled by hand: ``[-1,1]`` = ``2x − 1``, ``[0,1]`` = ``x``,
  ``[0,255]`` = ``255x``;
- grayscale as ITU-R BT.601 luma ``0.299 R + 0.587 G + 0.114 B`` replicated to three channels.

Tolerances, measured (Pillow 13, torch 2.x, CPU): against Pillow's float resize the largest
difference over 60 random size pairs (8–400 px, uniform noise, the worst case) was 2.2e-5 for
bilinear and 3.3e-5 for bicubic, on the photographs ≤ 1.7e-5; the difference grows with the
image side (torch computes sample positions in float32), so the tests allow 1e-4 (0.026 of an
8-bit level). Scaling and luma are checked to float32 rounding.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from lpips_core.conventions import to_input

REPO = Path(__file__).resolve().parents[1]
RESIZE_ATOL = 1e-4  # measured ≤ 3.3e-5, see the module docstring
BT601 = np.array([0.299, 0.587, 0.114])

# (source H, W) → (target H, W): down, up, non-square both ways, near-identity, large ratios.
RESIZES = [
    ((97, 131), (64, 64)),
    ((64, 64), (97, 131)),
    ((256, 256), (64, 64)),
    ((300, 200), (224, 224)),
    ((50, 70), (49, 71)),
    ((33, 33), (256, 256)),
    ((301, 305), (256, 365)),
    ((8, 400), (40, 9)),
]


def pillow_resize(img: np.ndarray, size: tuple[int, int], resample: int) -> np.ndarray:
    """``(H, W, 3)`` float → ``(h, w, 3)`` float64 by Pillow on each channel as a mode ``"F"`` image."""
    h, w = size
    channels = []
    for c in range(img.shape[2]):
        band = Image.fromarray(np.ascontiguousarray(img[..., c], dtype=np.float32))
        assert band.mode == "F"
        channels.append(np.asarray(band.resize((w, h), resample), dtype=np.float64))
    return np.stack(channels, axis=-1)


def hwc(x: torch.Tensor) -> np.ndarray:
    """``(1, 3, H, W)`` tensor → ``(H, W, 3)`` float64 array."""
    assert x.dtype == torch.float32 and x.ndim == 4 and x.shape[:2] == (1, 3)
    return x[0].permute(1, 2, 0).double().numpy()


def noise(shape: tuple[int, int], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((*shape, 3), dtype=np.float32)


def photo(name: str) -> tuple[np.ndarray, np.ndarray]:
    """``sample_images/{name}.png`` as its 8-bit ``(H, W, 3)`` array and as float32 in ``[0, 1]``."""
    with Image.open(REPO / "sample_images" / f"{name}.png") as im:
        u8 = np.asarray(im.convert("RGB"))
    return u8, u8.astype(np.float32) / 255.0


# ----------------------------------------------------------------------------- resize
@pytest.mark.parametrize("src,dst", RESIZES, ids=lambda s: "x".join(map(str, s)))
def test_default_resize_equals_pillow_bilinear(src, dst):
    img = noise(src, seed=sum(src) + sum(dst))
    got = hwc(to_input(img, convention="[0,1]", size=dst))
    assert got.shape == (*dst, 3)
    np.testing.assert_allclose(got, pillow_resize(img, dst, Image.BILINEAR), atol=RESIZE_ATOL, rtol=0)


@pytest.mark.parametrize("src,dst", RESIZES, ids=lambda s: "x".join(map(str, s)))
def test_bicubic_equals_pillow_bicubic_clipped(src, dst):
    img = noise(src, seed=sum(src) * sum(dst))
    got = hwc(to_input(img, convention="[0,1]", size=dst, method="bicubic"))
    want = np.clip(pillow_resize(img, dst, Image.BICUBIC), 0.0, 1.0)
    np.testing.assert_allclose(got, want, atol=RESIZE_ATOL, rtol=0)
    assert got.min() >= 0.0 and got.max() <= 1.0


@pytest.mark.parametrize("name", ["chelsea", "coffee"])
@pytest.mark.parametrize("size", [64, (97, 131), 224, (700, 900)], ids=str)
def test_photographs_resize_like_pillow(name, size):
    """On real photographs, in float and against Pillow's own 8-bit RGB resize. The latter rounds
    to 8 bits after each of its two passes: ≤ 0.5 level after the first, carried through the
    second pass's convex weights, plus ≤ 0.5 at the end, so it is within one 8-bit level
    (measured: up to exactly 1.0)."""
    u8, img = photo(name)
    h, w = (size, size) if isinstance(size, int) else size
    got = hwc(to_input(img, convention="[0,1]", size=size))
    np.testing.assert_allclose(got, pillow_resize(img, (h, w), Image.BILINEAR), atol=RESIZE_ATOL, rtol=0)
    with Image.fromarray(u8) as im:
        eight_bit = np.asarray(im.resize((w, h), Image.BILINEAR), dtype=np.float64)
    assert np.abs(got * 255.0 - eight_bit).max() <= 1.0 + 1e-3


def test_no_size_keeps_the_image_exactly():
    img = noise((37, 53), seed=3)
    got = hwc(to_input(img, convention="[0,1]"))
    np.testing.assert_array_equal(got, img.astype(np.float64))


def test_int_size_is_square():
    img = noise((40, 90), seed=4)
    got = hwc(to_input(img, convention="[0,1]", size=32))
    np.testing.assert_allclose(got, pillow_resize(img, (32, 32), Image.BILINEAR), atol=RESIZE_ATOL, rtol=0)


# ----------------------------------------------------------------------------- ranges
@pytest.mark.parametrize("convention,scale,offset", [("[-1,1]", 2.0, -1.0), ("[0,1]", 1.0, 0.0),
                                                     ("[0,255]", 255.0, 0.0)])
def test_range_conventions_are_the_hand_scaled_image(convention, scale, offset):
    img = noise((29, 31), seed=5)
    img[0, 0], img[0, 1] = 0.0, 1.0  # both ends of the range
    got = to_input(img, convention=convention)
    want = np.float32(scale) * img + np.float32(offset)  # float32 arithmetic, as the library's
    np.testing.assert_array_equal(hwc(got), want.astype(np.float64))
    lo, hi = offset, scale + offset
    assert float(got[0, :, 0, 0].min()) == lo and float(got[0, :, 0, 1].max()) == hi


def test_default_convention_is_minus_one_to_one():
    img = noise((16, 16), seed=6)
    np.testing.assert_array_equal(hwc(to_input(img)), (2.0 * img.astype(np.float64) - 1.0).astype(np.float32))


def test_0_255_feeds_the_raw_8bit_values():
    """An 8-bit file divided by 255 and fed as ``[0,255]`` is the file's own bytes again."""
    u8, img = photo("coffee")
    np.testing.assert_allclose(hwc(to_input(img, convention="[0,255]")), u8, atol=1e-4, rtol=0)


def test_resize_happens_in_0_1_before_the_convention():
    img = noise((97, 131), seed=7)
    got = hwc(to_input(img, convention="[-1,1]", size=(64, 64)))
    np.testing.assert_allclose(got, 2.0 * pillow_resize(img, (64, 64), Image.BILINEAR) - 1.0,
                               atol=2 * RESIZE_ATOL, rtol=0)


# ----------------------------------------------------------------------------- grayscale
def test_grayscale_is_bt601_luma_replicated():
    img = noise((23, 41), seed=8)
    got = hwc(to_input(img, convention="[0,1]", grayscale=True))
    luma = img.astype(np.float64) @ BT601
    for c in range(3):
        np.testing.assert_allclose(got[..., c], luma, atol=1e-6, rtol=0)


def test_grayscale_of_known_colours():
    """Pure red, green, blue and white give their BT.601 weights and 1."""
    img = np.zeros((1, 4, 3), dtype=np.float32)
    img[0, 0, 0] = img[0, 1, 1] = img[0, 2, 2] = 1.0
    img[0, 3] = 1.0
    got = hwc(to_input(img, convention="[0,1]", grayscale=True))[0, :, 0]
    np.testing.assert_allclose(got, [0.299, 0.587, 0.114, 1.0], atol=1e-6, rtol=0)


def test_grayscale_resized_and_scaled_end_to_end():
    img = noise((97, 131), seed=9)
    got = hwc(to_input(img, convention="[0,255]", size=(64, 64), grayscale=True))
    want = 255.0 * (pillow_resize(img, (64, 64), Image.BILINEAR) @ BT601)
    for c in range(3):
        np.testing.assert_allclose(got[..., c], want, atol=255 * RESIZE_ATOL, rtol=0)


def test_two_dimensional_image_is_replicated_as_it_is():
    grey = noise((19, 27), seed=10)[..., 0]
    got = hwc(to_input(grey, convention="[0,1]"))
    for c in range(3):
        np.testing.assert_array_equal(got[..., c], grey.astype(np.float64))
