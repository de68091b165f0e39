"""diagnostics: the checks of the Debug page, each against the library's own numbers."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from PIL import Image

from lpips_explorer import diagnostics as dg
from lpips_explorer import synth
from lpips_core.conventions import RESIZE_METHODS, to_input
from lpips_explorer.distortions import gaussian_blur, jpeg, shift
from lpips_core.images import load_image
from lpips_core.model import LPIPS
from lpips_core.sweeps import lpips_many

ORIENTATIONS = {
    2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}


@pytest.fixture(scope="module")
def alex():
    return LPIPS("alex")


@pytest.fixture(scope="module")
def ref():
    """A 64×80 textured reference (non-square, to catch H/W mix-ups)."""
    return np.ascontiguousarray(synth.texture_patch(7, size=80)[:64])


def _png(array: np.ndarray, mode: str = "RGB") -> bytes:
    u8 = np.rint(np.clip(array, 0, 1) * 255).astype(np.uint8)
    im = Image.fromarray(u8)
    if mode == "L":
        im = im.convert("L")
    elif mode == "RGBA":
        alpha = np.full(u8.shape[:2], 255, np.uint8)
        alpha[:, : u8.shape[1] // 2] = 64
        im = Image.fromarray(np.dstack([u8, alpha]))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def _lp(model, a, b, **kw) -> float:
    return float(lpips_many(model, a, [b], **kw).total[0])


# --------------------------------------------------------------------------- tools
def test_undo_exif_inverts_pillow_for_every_tag():
    a = (np.random.default_rng(0).random((5, 7, 3)) * 255).astype(np.uint8)
    for tag, transpose in ORIENTATIONS.items():
        applied = np.asarray(Image.fromarray(a).transpose(transpose))
        np.testing.assert_array_equal(dg.undo_exif(applied, tag), a, err_msg=f"tag {tag}")
    np.testing.assert_array_equal(dg.undo_exif(a, 1), a)


def test_estimate_shift_sign(ref):
    moved = shift(ref, 3, 2, boundary="reflect")
    dy, dx = dg.estimate_shift(ref, moved)
    assert (dy, dx) == pytest.approx((-2.0, -3.0), abs=0.15)
    back = shift(moved, dx, dy, boundary="edge")
    assert np.abs(back[4:-4, 4:-4] - ref[4:-4, 4:-4]).max() < 0.05
    with pytest.raises(ValueError, match="equal shapes"):
        dg.estimate_shift(ref, ref[:10])


def test_blockiness_definition():
    photo = load_image("sample_images/chelsea.png", max_side=128).array
    assert dg.blockiness(photo) == pytest.approx(1.0, abs=0.15)
    assert dg.blockiness(jpeg(photo, 10)) > 1.5
    assert dg.blockiness(jpeg(photo, 10)) > dg.blockiness(jpeg(photo, 60)) > dg.blockiness(photo)
    assert dg.blockiness(np.full((32, 32, 3), 0.5, np.float32)) == 1.0
    # a pure 8-px block pattern: steps only on the boundaries
    blocks = np.kron(np.random.default_rng(1).random((4, 4)), np.ones((8, 8)))
    assert math.isinf(dg.blockiness(np.repeat(blocks[:, :, None], 3, 2)))
    with pytest.raises(ValueError, match="at least 16"):
        dg.blockiness(np.zeros((10, 40, 3)))


def test_match_size_uses_the_engine_resize(ref):
    assert dg.match_size(ref, ref.shape[:2]) is ref
    out = dg.match_size(ref, (32, 40), method="area")
    assert out.shape == (32, 40, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out, ref.reshape(32, 2, 40, 2, 3).mean((1, 3)), atol=1e-6)
    with pytest.raises(ValueError, match="method"):
        dg.match_size(ref, (32, 40), method="lanczos")


def test_image_facts():
    rgba = load_image(_png(synth.texture_patch(0, size=40), "RGBA"))
    facts = dg.image_facts(rgba)
    assert facts["had_alpha"] and facts["format"] == "PNG" and facts["bit_depth"] == 8
    assert facts["size_hw"] == [40, 40]
    gray = dg.image_facts(load_image(_png(synth.texture_patch(0, size=40), "L")))
    assert gray["was_grayscale"] and gray["effectively_grayscale"] and gray["levels"] <= 256
    json.dumps(facts)  # JSON-ready


# --------------------------------------------------------------------------- LPIPS-based checks
def test_resize_options_equal_sizes(alex, ref):
    test = gaussian_blur(ref, 1.0)
    opts = dg.resize_options(alex, ref, test)
    assert [o.label for o in opts] == ["native size", "both → 64×64 px", "both → 256×256 px"]
    assert opts[0].lpips == pytest.approx(_lp(alex, ref, test))
    assert opts[2].lpips == pytest.approx(_lp(alex, ref, test, size=256))


def test_resize_options_different_sizes(alex, ref):
    test = dg.match_size(gaussian_blur(ref, 1.0), (48, 60))
    opts = {o.label: o for o in dg.resize_options(alex, ref, test)}
    for m in RESIZE_METHODS:
        o = opts[f"test → reference size ({m})"]
        assert o.size == (64, 80)
        assert o.lpips == pytest.approx(_lp(alex, ref, dg.match_size(test, (64, 80), method=m)))
    assert opts["reference → test size (bilinear)"].lpips == pytest.approx(
        _lp(alex, dg.match_size(ref, (48, 60)), test))
    assert "central crop to 60×48 px" in opts


def test_alignment_improves_a_shifted_copy(alex, ref):
    moved = shift(ref, 2, 1, boundary="wrap")
    a = dg.alignment(alex, ref, moved)
    assert (a.dy, a.dx) == pytest.approx((-1.0, -2.0), abs=0.15) and a.crop == 2
    assert a.lpips_after < 0.5 * a.lpips_before
    crop = np.s_[2:-2, 2:-2]
    assert a.lpips_before == pytest.approx(_lp(alex, np.ascontiguousarray(ref[crop]),
                                                   np.ascontiguousarray(moved[crop])))


@pytest.fixture(scope="module")
def demo(alex):
    photo = load_image("sample_images/chelsea.png", max_side=128).array
    ref_png, test_jpg = dg.demo_pair(photo, dx=3, dy=2, quality=20)
    r, t = load_image(ref_png), load_image(test_jpg)
    return r, t, dg.diagnose(alex, r, t)


def test_diagnose_demo_pair(alex, demo):
    r, t, d = demo
    assert t.format == "JPEG"
    assert d.score == pytest.approx(_lp(alex, r.array, t.array))
    assert float(d.per_layer.sum()) == pytest.approx(d.score, rel=1e-5)
    assert float(d.spatial_map.mean()) == pytest.approx(d.score, rel=0.02)
    assert d.layer_maps.shape == (5,) + r.array.shape[:2]
    assert [c.id for c in d.checks] == list(dg.CHECK_IDS) == [
        "size", "resolution", "bit_depth", "alpha", "grayscale", "exif_orientation", "misalignment", "jpeg_blockiness"]
    assert [c.name for c in d.checks] == [s.name for s in dg.CHECKS]
    status = {c.id: c.status for c in d.checks}
    assert status["misalignment"] == "warning" and status["jpeg_blockiness"] == "warning"
    assert status["size"] == status["alpha"] == status["exif_orientation"] == "ok"
    mis = d.check("misalignment")
    assert mis.scores["after"] < mis.scores["before"]
    assert (mis.scores["dy"], mis.scores["dx"]) == pytest.approx((-2, -3), abs=0.3)
    assert mis.delta == pytest.approx(mis.scores["before"] - mis.scores["after"])
    rng = d.check("bit_depth")
    assert rng.scores["[0,1]"] == pytest.approx(_lp(alex, r.array, t.array, convention="[0,1]"))
    assert rng.counterfactuals == {} and rng.delta is None  # 8-bit files: no rounding counterfactual
    gray = d.check("grayscale")
    assert gray.scores["both in gray"] == pytest.approx(_lp(alex, r.array, t.array, grayscale=True))
    assert gray.delta is None  # both in colour: the gray score is for comparison only
    blk = d.check("jpeg_blockiness")
    assert blk.scores["test"] == pytest.approx(dg.blockiness(t.array))
    assert blk.scores["test"] > dg.BLOCKINESS_THRESHOLD
    assert blk.scores["reference as JPEG q30"] == pytest.approx(_lp(alex, r.array, jpeg(r.array, 30)))
    size = d.check("size")  # equal sizes: the counterfactuals are the two resized pairs
    assert list(size.counterfactuals) == ["both → 64×64 px", "both → 256×256 px"]
    assert size.delta == pytest.approx(max(abs(v - d.score) for v in size.counterfactuals.values()))
    assert d.classic["mse"] == pytest.approx(float(np.mean((r.array.astype(float) - t.array) ** 2)))
    with pytest.raises(KeyError, match="no check with id 'Size'"):
        d.check("Size")


def test_diagnose_size_alpha_gray_exif(alex, ref):
    # test: smaller, transparent on its left half
    small = dg.match_size(gaussian_blur(ref, 0.8), (48, 60))
    r = load_image(_png(ref))
    t = load_image(_png(small, "RGBA"))
    t_black = load_image(_png(small, "RGBA"), background=(0, 0, 0))
    d = dg.diagnose(alex, r, t, method="bicubic", test_on_black=t_black.array)
    by = {c.id: c for c in d.checks}
    assert by["size"].status == "warning" and "bicubic" in by["size"].finding
    assert d.score == pytest.approx(by["size"].scores["test → reference size (bicubic)"])
    assert d.test.shape == ref.shape
    assert by["alpha"].status == "warning"
    assert by["alpha"].scores["on black"] == pytest.approx(
        _lp(alex, r.array, dg.match_size(t_black.array, (64, 80), method="bicubic")))
    assert by["alpha"].scores["on black"] != pytest.approx(d.score)
    assert by["alpha"].delta == pytest.approx(abs(by["alpha"].scores["on black"] - d.score))

    # grayscale test against a colour reference
    g = load_image(_png(ref, "L"))
    d = dg.diagnose(alex, r, g)
    assert d.check("grayscale").status == "warning"
    assert d.check("grayscale").delta == pytest.approx(abs(d.check("grayscale").scores["both in gray"] - d.score))

    # EXIF: the test's pixels are stored rotated, with tag 6 to turn them upright
    stored = np.asarray(Image.fromarray(np.rint(ref * 255).astype(np.uint8)).transpose(Image.Transpose.ROTATE_90))
    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    Image.fromarray(stored).save(buf, format="JPEG", quality=95, exif=exif)
    e = load_image(buf.getvalue())
    assert e.exif_orientation == 6 and e.array.shape == ref.shape
    d = dg.diagnose(alex, r, e)
    exif_check = d.check("exif_orientation")
    assert exif_check.status == "warning"
    ignored = dg.match_size(dg.undo_exif(e.array, 6), (64, 80))
    assert exif_check.scores["tag ignored"] == pytest.approx(_lp(alex, r.array, ignored))
    assert exif_check.scores["tag ignored"] > 2 * d.score
    assert exif_check.delta == pytest.approx(exif_check.scores["tag ignored"] - d.score)


def test_diagnose_16_bit(alex, ref):
    lum = (ref @ np.array([0.299, 0.587, 0.114]))
    buf = io.BytesIO()
    Image.fromarray(np.rint(lum * 65535).astype(np.uint16)).save(buf, format="PNG")
    t = load_image(buf.getvalue())
    assert t.bit_depth == 16
    d = dg.diagnose(alex, load_image(_png(ref, "L")), t)
    c = d.check("bit_depth")
    assert c.status == "info" and "test rounded to 8 bits" in c.scores
    assert c.counterfactuals == {"test rounded to 8 bits": c.scores["test rounded to 8 bits"]}


def test_report_is_strict_json_with_the_configuration(alex, demo):
    _, _, d = demo
    rep = dg.build_report(d, versions=dg.library_versions({"streamlit": "x.y"}), extra_config={"working side": 128})
    text = dg.report_json(rep)
    back = json.loads(text)
    for key in ("net", "version", "lin", "convention", "size", "resize_method", "weights", "device", "working side"):
        assert key in back["configuration"]
    assert back["configuration"]["net"] == "alex" and back["lpips"] == pytest.approx(d.score)
    for lib in ("torch", "torchvision", "lpips_core", "numpy", "streamlit"):
        assert back["versions"][lib]
    assert [c["id"] for c in back["checks"]] == list(dg.CHECK_IDS) and sum(back["per_layer"].values()) == pytest.approx(d.score, rel=1e-5)
    assert dg.report_json({"psnr": float("inf"), "x": np.float32(1.5), "n": float("nan")}) == \
        '{\n  "psnr": "inf",\n  "x": 1.5,\n  "n": "nan"\n}'


def test_layer_breakdown_sums(alex, ref):
    dist = gaussian_blur(ref, 1.5)
    b = dg.layer_breakdown(alex, ref, dist)
    res = lpips_many(alex, ref, [dist])
    assert b.total == pytest.approx(float(res.total[0]))
    np.testing.assert_allclose(b.per_layer, res.per_layer[0].numpy(), rtol=1e-6)
    for l, name in enumerate(b.layer_names):
        assert float(b.contributions[l].sum()) == pytest.approx(float(b.per_layer[l]), rel=1e-4), name
        assert float(b.term_maps[l].mean()) == pytest.approx(float(b.per_layer[l]), rel=1e-4), name
        assert b.features_ref[l].shape[0] == b.contributions[l].shape[0] == b.weights[l].shape[0]
        np.testing.assert_allclose(np.linalg.norm(b.features_ref[l], axis=0).max(), 1.0, atol=1e-5)
    base = dg.layer_breakdown(LPIPS("alex", lin=False), ref, dist)
    assert base.weights is None and float(base.contributions[0].sum()) == pytest.approx(float(base.per_layer[0]), rel=1e-4)
    with pytest.raises(ValueError, match="differs in shape"):
        dg.layer_breakdown(alex, ref, ref[:40])


# --------------------------------------------------------------------------- the registry
def _context(model, r, t, score=None) -> dg.PairContext:
    tst = dg.match_size(t.array, r.array.shape[:2])
    score = _lp(model, r.array, tst) if score is None else score
    return dg.PairContext(model, r, t, r.array, tst, score, "bilinear", "[-1,1]")


def test_registry_ids_are_unique_and_name_every_check():
    assert len(set(dg.CHECK_IDS)) == len(dg.CHECKS) == 8
    assert all(callable(spec.run) and spec.name for spec in dg.CHECKS)


def test_run_checks_runs_the_given_specs_in_order(alex, demo):
    r, t, d = demo
    ctx = _context(alex, r, t, d.score)
    picked = [s for s in dg.CHECKS if s.id in ("jpeg_blockiness", "size")][::-1]
    out = dg.run_checks(ctx, picked)
    assert [c.id for c in out] == ["jpeg_blockiness", "size"]
    assert out[0] == d.check("jpeg_blockiness") and out[1] == d.check("size")
    custom = dg.CheckSpec("size", "Custom", lambda c: dg.Outcome("info", "f", "e", {"x": 1.0}, {"alt": c.score + 0.25}))
    (c,) = dg.run_checks(ctx, [custom])
    assert (c.id, c.name, c.status, c.delta) == ("size", "Custom", "info", pytest.approx(0.25))


def test_thresholds_are_the_named_constants(alex, demo, monkeypatch):
    """The checks read their thresholds from the module constants (no inline numbers)."""
    from lpips_explorer.diagnostics import checks

    r, t, _ = demo
    spec = {s.id: s for s in dg.CHECKS}
    ctx = _context(alex, r, t)
    assert dg.run_checks(ctx, [spec["jpeg_blockiness"]])[0].status == "warning"
    monkeypatch.setattr(checks, "BLOCKINESS_THRESHOLD", ctx.blockiness["test"] + 0.01)
    assert dg.run_checks(ctx, [spec["jpeg_blockiness"]])[0].status == "ok"
    assert dg.run_checks(ctx, [spec["misalignment"]])[0].status == "warning"  # about 3.6 px
    monkeypatch.setattr(checks, "MISALIGNMENT_PX", 5.0)
    assert dg.run_checks(ctx, [spec["misalignment"]])[0].status == "ok"


def test_an_rgba_file_is_described_by_its_8_bit_levels(alex):
    """An 8-bit RGBA file composited on white: its levels are counted on the 8-bit grid (at most
    256), not as distinct floats of the composite. The expected count is recomputed here from the
    file's own bytes: composite ``c·a + (1 − a)`` of the red channel, rounded to 8 bits. The same
    file's raw float count is far above 256 (what the finding printed as "16412 levels" for a
    photo with a soft alpha edge)."""
    rng = np.random.default_rng(3)
    rgb = (rng.random((48, 64, 3)) * 255).astype(np.uint8)
    alpha = np.tile(np.linspace(0, 255, 64).astype(np.uint8), (48, 1))  # a soft edge: every alpha level
    buf = io.BytesIO()
    Image.fromarray(np.dstack([rgb, alpha]), "RGBA").save(buf, format="PNG")
    loaded = load_image(buf.getvalue())
    a = alpha / 255.0
    composite = rgb / 255.0 * a[..., None] + (1 - a[..., None])
    want = np.unique(np.rint(composite[..., 0] * 255)).size
    facts = dg.image_facts(loaded)
    assert np.unique(loaded.array[..., 0]).size > 1000  # the composite's floats, off the 8-bit grid
    assert (facts["levels"], facts["levels_possible"]) == (want, 256) and want <= 256
    ctx = _context(alex, loaded, load_image(_png(loaded.array)))
    (c,) = dg.run_checks(ctx, [s for s in dg.CHECKS if s.id == "bit_depth"])
    assert c.finding.startswith(f"reference: 8-bit RGBA (composited on white), values {composite.min():.3f}–1.000, "
                                f"{want} of 256 red levels; test: 8-bit RGB, ")
    assert dg.distinct_levels(np.array([0.0, 0.5, 0.502, 1.0]), 8) == (3, 256)
    assert dg.distinct_levels(np.array([0.25, 0.25, 0.75]), 32) == (2, None)


def test_a_zero_offset_is_written_0_never_signed(alex, ref):
    """Identical images: phase correlation finds (0, 0), written "0 px" (``-dy`` of 0.0 is -0.0,
    which ``:+.1f`` wrote as "-0.0 px")."""
    r = load_image(_png(ref))
    (c,) = dg.run_checks(_context(alex, r, r), [s for s in dg.CHECKS if s.id == "misalignment"])
    assert (c.scores["dy"], c.scores["dx"]) == (0.0, 0.0)
    assert "offset by 0 px vertically (+ = down) and 0 px horizontally (+ = right)" in c.finding
    assert "-0.0" not in c.finding and "+0.0" not in c.finding


def test_bit_depth_flags_a_narrow_range(alex, ref):
    dark = load_image(_png(ref * 0.3))  # values in [0, 0.3]: span below NARROW_RANGE
    r = load_image(_png(ref))
    (c,) = dg.run_checks(_context(alex, r, dark), [s for s in dg.CHECKS if s.id == "bit_depth"])
    assert dark.array.max() - dark.array.min() < dg.NARROW_RANGE
    assert c.status == "warning" and "The test image spans less than half" in c.finding


# --------------------------------------------------------------------------- files as uploaded
def debug_pair(dy: int = 4, dx: int = 6, scale: float = 0.75, quality: int = 60) -> tuple[bytes, bytes]:
    """An RGBA PNG reference (168×256; its left half 25 % opaque over inverted colours) and a test
    JPEG of it: composited on white, shifted ``(dy, dx)`` px (reflect), resized by ``scale``
    (Lanczos, 126×192) and saved at ``quality``."""
    rgb = load_image("sample_images/rocket.png", max_side=None).array[::2, ::2][:168, :256]
    h, w = rgb.shape[:2]
    half = w // 2 + 3  # the alpha edge off the 8-px JPEG grid
    hidden = rgb.copy()
    hidden[:, :half] = 1.0 - rgb[:, :half]
    alpha = np.ones((h, w, 1), np.float32)
    alpha[:, :half] = 0.25
    u8 = np.rint(np.concatenate([hidden, alpha], axis=2) * 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(u8, "RGBA").save(buf, format="PNG")
    a = u8[..., 3:] / 255.0
    on_white = (u8[..., :3] / 255.0 * a + (1 - a)).astype(np.float32)
    moved = np.rint(shift(on_white, dx, dy, boundary="reflect") * 255).astype(np.uint8)
    small = Image.fromarray(moved).resize((round(w * scale), round(h * scale)), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    small.save(out, format="JPEG", quality=quality)
    return buf.getvalue(), out.getvalue()


@pytest.fixture(scope="module")
def uploaded(alex):
    ref_png, test_jpg = debug_pair()
    return ref_png, test_jpg, dg.diagnose_files(alex, ref_png, test_jpg, reference_name="ref.png",
                                                test_name="test.jpg")


def test_diagnose_files_scores_the_files_as_uploaded(alex, uploaded):
    ref_png, test_jpg, d = uploaded
    r, t = load_image(ref_png), load_image(test_jpg)  # the library's own computation, native size
    assert (r.size, t.size, r.had_alpha, t.format) == ((168, 256), (126, 192), True, "JPEG")
    assert d.score == pytest.approx(_lp(alex, r.array, dg.match_size(t.array, r.size)), abs=1e-6)
    assert d.check("resolution").status == "ok"  # the working size (256) is this pair's own size
    assert d.native_size == {"reference_hw": [168, 256], "test_hw": [126, 192], "scored_hw": [168, 256],
                             "policy": dg.SIZE_POLICY, "resolution": "native", "max_side": dg.NATIVE_MAX_SIDE,
                             "downscaled": False}
    # the shift in the reference file's pixels (the test was moved 4 down, 6 right before resizing)
    mis = d.check("misalignment")
    assert (mis.scores["dy"], mis.scores["dx"]) == pytest.approx((-4, -6), abs=0.3)
    assert mis.status == "warning"
    # blockiness on the JPEG as decoded, at its own 126×192 grid
    blk = d.check("jpeg_blockiness")
    assert d.blockiness["test"] == pytest.approx(dg.blockiness(t.array)) and blk.status == "warning"
    assert d.blockiness["test"] > dg.BLOCKINESS_THRESHOLD
    like = dg.encode_like(r.array, test_jpg)
    assert blk.counterfactuals["reference re-encoded like the test"] == pytest.approx(
        _lp(alex, like, dg.match_size(t.array, r.size)), abs=1e-6)
    # alpha: dropped and on black, against the library on the same files
    al = d.check("alpha")
    dropped = load_image(dg.alpha_dropped(ref_png)).array
    black = load_image(ref_png, background=(0, 0, 0)).array
    tst = dg.match_size(t.array, r.size)
    assert al.counterfactuals["alpha dropped"] == pytest.approx(_lp(alex, dropped, tst), abs=1e-6)
    assert al.counterfactuals["on black"] == pytest.approx(_lp(alex, black, tst), abs=1e-6)
    assert dg.alpha_dropped(test_jpg) is None
    # ranked by |change|, alpha first
    ranked = [f.check_id for f in d.ranking]
    assert ranked[0] == "alpha" and sorted(ranked) == sorted(dg.CHECK_IDS)
    changes = [abs(f.change) for f in d.ranking if f.change is not None]
    assert changes == sorted(changes, reverse=True) and changes[0] == pytest.approx(al.delta)
    assert d.ranking[0].score == pytest.approx(al.counterfactuals[d.ranking[0].counterfactual])
    rep = json.loads(dg.report_json(dg.build_report(d, versions={})))
    assert rep["ranking"][0]["check_id"] == "alpha" and rep["native_size"]["reference_hw"] == [168, 256]


def test_diagnose_files_at_the_working_size_reports_file_pixels(alex):
    ref_png, test_jpg = debug_pair()
    d = dg.diagnose_files(alex, ref_png, test_jpg, resolution="working", working_side=128)
    r, t = load_image(ref_png, max_side=128), load_image(test_jpg, max_side=128)
    assert d.native_size["scored_hw"] == [84, 128] and d.native_size["reference_hw"] == [168, 256]
    assert d.score == pytest.approx(_lp(alex, r.array, dg.match_size(t.array, r.size)), abs=1e-6)
    mis = d.check("misalignment")  # measured at 84×128, reported in the 168×256 file's pixels
    assert (mis.scores["dy"], mis.scores["dx"]) == pytest.approx((-4, -6), abs=0.5)
    assert mis.scores["dx"] == pytest.approx(2 * mis.scores["dx_scored_px"])
    res = d.check("resolution")  # the counterfactual: the files at their own size
    assert res.status == "warning"
    native = load_image(ref_png).array
    assert res.counterfactuals["native size"] == pytest.approx(
        _lp(alex, native, dg.match_size(load_image(test_jpg).array, native.shape[:2])), abs=1e-6)
    assert d.check("jpeg_blockiness").status == "warning"  # still measured on the file itself


def test_diagnose_files_caps_native_scoring_and_refuses_bad_options(alex):
    ref_png, test_jpg = debug_pair()
    d = dg.diagnose_files(alex, ref_png, test_jpg, max_side=128)
    assert d.native_size["downscaled"] and d.native_size["scored_hw"] == [84, 128]
    assert any("downscaled" in n.lower() for n in load_image(ref_png, max_side=128).notices)
    with pytest.raises(ValueError, match="'huge'"):
        dg.diagnose_files(alex, ref_png, test_jpg, resolution="huge")
    with pytest.raises(ValueError, match="max_side must be a positive int, got 0"):
        dg.diagnose_files(alex, ref_png, test_jpg, max_side=0)


def test_rank_checks_orders_by_absolute_change():
    def check(cid, cf, base=None):
        return dg.Check("info", "f", "e", {}, cf, base, id=cid, name=cid)

    rows = dg.rank_checks([check("size", {}), check("alpha", {"a": 0.1}), check("misalignment", {"x": 0.3}, 0.5),
                           check("grayscale", {"g": 0.85, "h": 0.45})], 0.5)
    assert [(r.check_id, r.counterfactual, r.change) for r in rows] == [
        ("alpha", "a", pytest.approx(-0.4)), ("grayscale", "g", pytest.approx(0.35)),
        ("misalignment", "x", pytest.approx(-0.2)), ("size", None, None)]


def test_diagnose_files_reports_partial_results_score_first(alex, uploaded):
    """``on_partial`` sees the finished score before any check, then one more check each time; the
    partials agree with the finished diagnosis (the page shows the score while the checks run)."""
    ref_png, test_jpg, final = uploaded
    seen = []
    d = dg.diagnose_files(alex, ref_png, test_jpg, reference_name="ref.png", test_name="test.jpg",
                          on_partial=seen.append)
    assert d.complete and d.pending == () and d.score == pytest.approx(final.score, abs=1e-7)
    assert len(seen) == len(dg.CHECKS)
    assert [len(p.checks) for p in seen] == list(range(len(dg.CHECKS)))
    assert [p.pending for p in seen] == [dg.CHECK_IDS[i:] for i in range(len(dg.CHECKS))]
    assert not any(p.complete for p in seen)
    for p in seen:
        assert p.score == d.score and np.array_equal(p.spatial_map, d.spatial_map)
        assert p.classic == d.classic and p.native_size == d.native_size and p.config == d.config
        assert [c.id for c in p.checks] == list(dg.CHECK_IDS[:len(p.checks)])
        assert sorted(f.check_id for f in p.ranking) == sorted(c.id for c in p.checks)
    assert [c.delta for c in seen[-1].checks] == [c.delta for c in d.checks[:-1]]


def test_diagnose_files_keeps_only_the_pairs_reference_cached(uploaded):
    """The counterfactuals' references (on black, alpha dropped, resized, cropped…) are not stored
    in the model's reference cache: after a diagnosis it holds the pair's own reference alone, so
    the user's next test image against the same reference needs one network pass, not two."""
    from lpips_core.caching import FeatureCache

    ref_png, test_jpg, _ = uploaded
    model = LPIPS("alex")
    model.ref_cache = FeatureCache(max_bytes=1 << 30)
    d = dg.diagnose_files(model, ref_png, test_jpg)
    assert len(d.checks) == len(dg.CHECKS)
    assert len(model.ref_cache) == 1
    x = to_input(d.reference)
    assert FeatureCache.key(x) in model.ref_cache._entries
    misses = model.ref_cache.misses
    dg.diagnose_files(model, ref_png, test_jpg)
    assert model.ref_cache.misses == misses and len(model.ref_cache) == 1
