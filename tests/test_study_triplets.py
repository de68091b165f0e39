"""Triplet recipes (lpips_explorer.study.triplets): drawn deterministically, stored as JSON, regenerated bit for bit."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from lpips_explorer import distortions
from lpips_explorer.study import triplets as T

REPO = T.SAMPLES_DIR.parent


def test_every_family_renders_a_64px_triplet():
    recipes = T.make_recipes(len(T.FAMILIES), families=T.FAMILIES, seed=5)
    assert sorted(r.family for r in recipes) == sorted(T.FAMILIES)
    for r in recipes:
        t = T.render(r)
        for img in (t.ref, t.p0, t.p1):
            assert img.shape == (64, 64, 3) and img.dtype == np.float32
            assert 0.0 <= img.min() and img.max() <= 1.0
        assert not np.array_equal(t.p0, t.ref) and not np.array_equal(t.p1, t.ref)
        # the reference is the crop itself: the source pixels at the patch position
        src = T.source_image(r.image)
        m = r.margin
        np.testing.assert_array_equal(t.ref, src[r.top + m:r.top + m + 64, r.left + m:r.left + m + 64])


def test_mixed_family_puts_one_distortion_on_each_side():
    for r in T.make_recipes(12, families=["shift-vs-blur"], seed=11):
        names = {r.steps0[0][0], r.steps1[0][0]}
        assert names == {"shift", "gaussian_blur"}
    sides = [r.steps0[0][0] for r in T.make_recipes(40, families=["shift-vs-blur"], seed=11)]
    assert 8 < sides.count("shift") < 32  # the side is drawn, not fixed


def test_copy_equals_the_distortion_applied_to_the_context():
    r = T.make_recipes(1, families=["shift-vs-blur"], seed=2)[0]
    src = T.source_image(r.image)
    side = r.patch + 2 * r.margin
    ctx = np.array(src[r.top:r.top + side, r.left:r.left + side])
    t = T.render(r)
    m = r.margin
    np.testing.assert_array_equal(t.p0, distortions.chain(ctx, r.steps0)[m:m + 64, m:m + 64])
    np.testing.assert_array_equal(t.p1, distortions.chain(ctx, r.steps1)[m:m + 64, m:m + 64])


def test_same_seed_same_recipes_other_seed_other_recipes():
    a = [r.to_json() for r in T.make_recipes(10, families=["noise", "jpeg-vs-noise"], seed=7)]
    b = [r.to_json() for r in T.make_recipes(10, families=["noise", "jpeg-vs-noise"], seed=7)]
    c = [r.to_json() for r in T.make_recipes(10, families=["noise", "jpeg-vs-noise"], seed=8)]
    assert a == b and a != c


def test_recipe_json_round_trip_regenerates_the_same_bytes_in_a_fresh_process():
    """The recipe (JSON text only) regenerates bit-identical pixels in a new interpreter (no caches)."""
    recipes = T.make_recipes(len(T.FAMILIES), families=T.FAMILIES, seed=21)
    texts = [r.to_json() for r in recipes]
    assert [T.Recipe.from_json(t) for t in texts] == recipes
    here = [T.render(t).digest() for t in texts]
    code = ("import json, sys; from lpips_explorer.study import triplets as T; "
            "print(json.dumps([T.render(t).digest() for t in json.load(sys.stdin)]))")
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(texts), capture_output=True, text=True,
                         cwd=REPO, check=True, timeout=300)
    assert json.loads(out.stdout) == here
    # and the digest really depends on every bit
    t = T.render(texts[0])
    p1 = t.p1.copy()
    p1.view(np.uint32)[0, 0, 0] ^= 1
    assert T.digest(t.ref, t.p0, p1) != here[0]


def test_synthetic_and_uploaded_sources():
    r = T.make_recipes(3, families=["blur"], seed=1, images=["synth:texture:4"])
    assert all(x.image == "synth:texture:4" for x in r)
    np.testing.assert_array_equal(T.render(r[0]).ref, T.render(r[0].to_json()).ref)

    rgb = (np.random.default_rng(0).random((120, 150, 3)) * 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    png = buf.getvalue()
    uid = T.upload_id(png)
    recipes = T.make_recipes(2, families=["noise-vs-blur"], seed=3, images=[uid], uploads={uid: png})
    t = T.render(recipes[0].to_json(), uploads=lambda key: png if key == uid else None)
    m = recipes[0].margin
    np.testing.assert_array_equal(
        t.ref, rgb[recipes[0].top + m:recipes[0].top + m + 64, recipes[0].left + m:recipes[0].left + m + 64] / np.float32(255))
    with pytest.raises(ValueError, match="not available"):
        T.render(recipes[0])
    with pytest.raises(ValueError, match="another image"):
        T.render(recipes[0], uploads={uid: png + b"x"})


@pytest.mark.parametrize("kwargs, match", [
    (dict(n=0, families=["blur"], seed=0), "n must be"),
    (dict(n=3, families=["smear"], seed=0), "family must be one of"),
    (dict(n=3, families=[], seed=0), "at least one family"),
    (dict(n=3, families=["blur"], seed=-1), "seed must be"),
    (dict(n=3, families=["blur"], seed=0, images=["sample:nope"]), "no sample image"),
    (dict(n=3, families=["blur"], seed=0, images=["http://x"]), "image id must start"),
])
def test_make_recipes_rejects(kwargs, match):
    with pytest.raises(ValueError, match=match):
        T.make_recipes(kwargs.pop("n"), **kwargs)


def test_malformed_recipes_are_refused():
    good = T.make_recipes(1, families=["blur"], seed=0)[0].to_dict()
    with pytest.raises(ValueError, match="unknown recipe field"):
        T.Recipe.from_dict({**good, "colour": "red"})
    with pytest.raises(ValueError, match="unknown distortion"):
        T.Recipe.from_dict({**good, "steps0": [["smudge", {}]]})
    with pytest.raises(ValueError, match="top must be"):
        T.Recipe.from_dict({**good, "top": -1})
    with pytest.raises(ValueError, match="leaves the"):
        T.render({**good, "top": 10_000})
    with pytest.raises(ValueError, match="recipe version"):
        T.Recipe.from_dict({**good, "version": 99})
