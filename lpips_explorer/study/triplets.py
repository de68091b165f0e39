"""2AFC triplets for a class study: a reference patch and two distorted copies, kept as recipes.

A triplet is never stored as pixels. Its :class:`Recipe` says where the patch comes from (an
image id and a crop), which distortions each copy gets (names and parameters of
:mod:`lpips_explorer.distortions`, noise seeds included) and the seed its strengths were drawn from;
:func:`render` regenerates the same pixels, bit for bit, from that recipe (or from its JSON).

Geometry. The patch is ``patch`` pixels square (64, as in BAPPS). Distortions are applied to a
*context* of ``patch + 2 * margin`` pixels around it and the centre is cut out afterwards, so a
shift brings in real neighbouring pixels and a blur sees real neighbours (no wrapped or mirrored
border inside the patch): the largest shift (3 px) and blur radius (``4σ + 0.5`` ≤ 10 px) stay
within the 16 px margin.

Image ids:

- ``"sample:<name>"``: ``sample_images/<name>.png`` with its longer side brought to
  :data:`SOURCE_SIDE` (256) px by :func:`lpips_core.images.load_image`;
- ``"synth:texture:<seed>"``: :func:`lpips_explorer.synth.texture_patch` of side 256 for ``seed``;
- ``"upload:<hex>"``: an uploaded image, its PNG bytes kept by the study's store under that id
  (:func:`upload_id` is the SHA-256 of the PNG, first 32 hex digits). :func:`render` takes the
  bytes through ``uploads`` (a mapping or a callable ``id → bytes``).

Families (:data:`FAMILIES`) say which distortions the two copies get. A single family puts it
on both copies with independently drawn strengths (``blur`` draws a Gaussian blur or a
down-and-up resampling for each copy, ``colour`` a brightness, contrast or saturation change):
there the metrics mostly agree with each other. A mixed family (``"shift-vs-blur"``) puts
one distortion on each side, the side chosen at random, with strengths drawn from ranges where
the pixel metrics and the learned ones often disagree (a 1 to 2 px shift against a blur of
σ 0.6 to 1.6: MSE punishes the shift, people and LPIPS mostly the blur).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from lpips_explorer import distortions as _dist
from lpips_explorer import synth as _synth
from lpips_core.caching import memo
from lpips_core.conventions import LUMA
from lpips_core.images import load_image

__all__ = [
    "FAMILIES",
    "MIXED_FAMILIES",
    "PATCH",
    "MARGIN",
    "SOURCE_SIDE",
    "Recipe",
    "Triplet",
    "digest",
    "make_recipes",
    "render",
    "sample_ids",
    "source_image",
    "upload_id",
]

PATCH = 64
"""Side of the reference patch in pixels (BAPPS' 64)."""
MARGIN = 16
"""Context kept around the patch while distorting, in pixels."""
SOURCE_SIDE = 256
"""Longer side (px) sample photos and uploads are brought to before a patch is cut."""
SAMPLES_DIR = Path(__file__).resolve().parents[2] / "sample_images"
RECIPE_VERSION = 1
_MIN_STD = 0.06  # a crop flatter than this (luma std) is redrawn: nothing to judge on a patch of sky
_CROP_TRIES = 12

Step = tuple[str, dict[str, Any]]
Steps = tuple[Step, ...]


# --------------------------------------------------------------------------- the families
def _direction(rng: np.random.Generator, r: float) -> dict[str, Any]:
    angle = rng.choice([0.0, 90.0, 180.0, 270.0, 45.0, 135.0, 225.0, 315.0])
    dx, dy = r * math.cos(math.radians(angle)), r * math.sin(math.radians(angle))
    return {"dx": round(dx, 3), "dy": round(dy, 3), "boundary": "reflect"}


def _shift(rng: np.random.Generator) -> Steps:
    return (("shift", _direction(rng, float(rng.choice([1.0, 1.5, 2.0])))),)


def _gaussian_blur(rng: np.random.Generator) -> Steps:
    return (("gaussian_blur", {"sigma": round(float(rng.uniform(0.6, 1.6)), 3), "boundary": "reflect"}),)


def _blur(rng: np.random.Generator) -> Steps:
    """A Gaussian blur or a down-and-up resampling (two blurs the metrics weigh differently)."""
    if rng.random() < 0.5:
        return _gaussian_blur(rng)
    return (("resample", {"factor": round(float(rng.uniform(1.5, 3.0)), 3)}),)


def _noise(rng: np.random.Generator) -> Steps:
    return (("gaussian_noise", {"sigma": round(float(rng.uniform(0.03, 0.10)), 4),
                                "seed": int(rng.integers(2**31 - 1))}),)


def _jpeg(rng: np.random.Generator) -> Steps:
    return (("jpeg", {"quality": int(rng.integers(5, 41)), "subsampling": "4:2:0"}),)


def _dct(rng: np.random.Generator) -> Steps:
    return (("block_dct", {"q": round(float(rng.uniform(0.05, 0.35)), 4), "block": 8, "table": "uniform"}),)


def _colour(rng: np.random.Generator) -> Steps:
    """A brightness offset, a contrast change, or a saturation change with a small brightness offset
    (so that a grey photo, where saturation does nothing, still changes)."""
    kind = rng.choice(["brightness", "contrast", "saturation"])
    delta = round(float(rng.choice([-1, 1]) * rng.uniform(0.04, 0.12)), 4)
    if kind == "brightness":
        return (("brightness", {"delta": delta}),)
    if kind == "contrast":
        return (("contrast", {"factor": round(float(rng.choice([rng.uniform(0.6, 0.85), rng.uniform(1.15, 1.4)])), 3)}),)
    factor = round(float(rng.choice([rng.uniform(0.0, 0.5), rng.uniform(1.5, 2.5)])), 3)
    return (("saturation", {"factor": factor}), ("brightness", {"delta": round(delta / 3, 4)}))


#: One distortion family → how to draw one copy's steps.
_DRAW: dict[str, Callable[[np.random.Generator], Steps]] = {
    "shift": _shift, "blur": _blur, "noise": _noise, "jpeg": _jpeg, "dct": _dct, "colour": _colour,
}

#: The mixed families: one distortion on each copy (which side gets which is drawn).
MIXED_FAMILIES: dict[str, tuple[str, str]] = {
    "shift-vs-blur": ("shift", "gaussian blur"),
    "noise-vs-blur": ("noise", "gaussian blur"),
    "colour-vs-blur": ("colour", "gaussian blur"),
    "jpeg-vs-noise": ("jpeg", "noise"),
    "shift-vs-noise": ("shift", "noise"),
}

#: Every family a study can use: the single ones (both copies from it) and the mixed ones.
FAMILIES: tuple[str, ...] = tuple(_DRAW) + tuple(MIXED_FAMILIES)


def _steps(family: str, rng: np.random.Generator) -> tuple[Steps, Steps]:
    if family in MIXED_FAMILIES:
        a, b = ((_gaussian_blur if f == "gaussian blur" else _DRAW[f])(rng) for f in MIXED_FAMILIES[family])
        return (a, b) if rng.random() < 0.5 else (b, a)
    if family in _DRAW:
        return _DRAW[family](rng), _DRAW[family](rng)
    raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")


# --------------------------------------------------------------------------- recipes
def _freeze(steps: Any, name: str) -> Steps:
    """``[[name, {params}], …]`` (as JSON gives it) → a tuple of ``(name, dict)`` checked against the registry."""
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence):
        raise ValueError(f"{name} must be a list of [distortion, params] steps, got {steps!r}")
    out = []
    for i, step in enumerate(steps):
        if isinstance(step, (str, bytes)) or not isinstance(step, Sequence) or len(step) != 2:
            raise ValueError(f"{name}[{i}] must be a [distortion, params] pair, got {step!r}")
        dname, params = step
        if dname not in _dist.DISTORTIONS or not isinstance(params, Mapping):
            raise ValueError(f"{name}[{i}]: unknown distortion {dname!r} or params not a mapping ({params!r})")
        out.append((str(dname), dict(params)))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Everything needed to regenerate one triplet.

    Attributes:
        image: the source image id (``"sample:chelsea"``, ``"synth:texture:7"``, ``"upload:<hex>"``).
        top, left: the context's top-left corner in the source image; the patch starts ``margin``
            pixels further in.
        family: the family the distortions were drawn from (a key of :data:`FAMILIES`).
        steps0, steps1: each copy's distortion steps, ``((name, params), …)`` as
            :func:`lpips_explorer.distortions.chain` takes them (noise carries its own seed).
        seed: the seed the crop and the strengths were drawn from.
        patch, margin: patch side and context margin in pixels.
        version: the recipe format (1).
    """

    image: str
    top: int
    left: int
    family: str
    steps0: Steps
    steps1: Steps
    seed: int
    patch: int = PATCH
    margin: int = MARGIN
    version: int = RECIPE_VERSION

    def __post_init__(self) -> None:
        if not isinstance(self.image, str) or ":" not in self.image:
            raise ValueError(f"image must be an id such as 'sample:chelsea', got {self.image!r}")
        for name in ("top", "left", "seed", "patch", "margin", "version"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
            object.__setattr__(self, name, int(value))
        if self.patch < 11:
            raise ValueError(f"patch must be at least 11 px (the SSIM window), got {self.patch}")
        if self.version != RECIPE_VERSION:
            raise ValueError(f"recipe version {self.version} is not supported (this library reads {RECIPE_VERSION})")
        object.__setattr__(self, "steps0", _freeze(self.steps0, "steps0"))
        object.__setattr__(self, "steps1", _freeze(self.steps1, "steps1"))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["steps0"] = [[n, p] for n, p in self.steps0]
        d["steps1"] = [[n, p] for n, p in self.steps1]
        return d

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces): equal recipes give equal text."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Recipe":
        if not isinstance(d, Mapping):
            raise ValueError(f"a recipe must be a mapping, got {type(d).__name__}")
        unknown = sorted(set(d) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"unknown recipe field(s) {unknown}")
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> "Recipe":
        return cls.from_dict(json.loads(text))


@dataclasses.dataclass(frozen=True)
class Triplet:
    """A rendered triplet: ``ref``, ``p0``, ``p1`` each ``(patch, patch, 3)`` float32 in ``[0, 1]``."""

    ref: np.ndarray
    p0: np.ndarray
    p1: np.ndarray
    recipe: Recipe

    def digest(self) -> str:
        return digest(self.ref, self.p0, self.p1)


def digest(*images: np.ndarray) -> str:
    """SHA-256 (hex) of the images' shapes, dtypes and bytes: equal only for bit-identical pixels."""
    h = hashlib.sha256()
    for img in images:
        a = np.ascontiguousarray(img)
        h.update(f"{a.shape}{a.dtype}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def upload_id(png: bytes) -> str:
    """The image id of an uploaded image kept as ``png`` bytes: ``"upload:"`` + 32 hex digits of its SHA-256."""
    if not isinstance(png, (bytes, bytearray, memoryview)):
        raise TypeError(f"png must be bytes, got {type(png).__name__}")
    return "upload:" + hashlib.sha256(bytes(png)).hexdigest()[:32]


def sample_ids() -> list[str]:
    """``"sample:<name>"`` for every PNG in ``sample_images/``, sorted."""
    return [f"sample:{p.stem}" for p in sorted(SAMPLES_DIR.glob("*.png"))]


@memo(16)
def _sample(name: str) -> np.ndarray:
    path = SAMPLES_DIR / f"{name}.png"
    if not path.is_file():
        raise ValueError(f"no sample image {name!r} in {SAMPLES_DIR}")
    arr = load_image(path, max_side=SOURCE_SIDE).array
    arr.setflags(write=False)
    return arr


@memo(16)
def _texture(seed: int) -> np.ndarray:
    arr = _synth.texture_patch(seed, size=SOURCE_SIDE)
    arr.setflags(write=False)
    return arr


@memo(8)
def _upload(key: str, png: bytes) -> np.ndarray:
    arr = load_image(png, max_side=SOURCE_SIDE).array
    arr.setflags(write=False)
    return arr


Uploads = Mapping[str, bytes] | Callable[[str], bytes] | None


def source_image(image: str, *, uploads: Uploads = None) -> np.ndarray:
    """The source image of an id: ``(H, W, 3)`` float32 in ``[0, 1]``, read-only, longer side ≤ 256.

    Raises:
        ValueError: an unknown id, a missing sample or upload.
    """
    kind, _, rest = str(image).partition(":")
    if kind == "sample":
        return _sample(rest)
    if kind == "synth":
        pattern, _, seed = rest.partition(":")
        if pattern != "texture" or not seed.isdigit():
            raise ValueError(f"synthetic id must be 'synth:texture:<seed>', got {image!r}")
        return _texture(int(seed))
    if kind == "upload":
        png = None
        if callable(uploads):
            png = uploads(image)
        elif uploads is not None:
            png = uploads.get(image)
        if png is None:
            raise ValueError(f"the uploaded image {image!r} is not available (not in the study's store)")
        if upload_id(png) != image:
            raise ValueError(f"the bytes given for {image!r} are another image ({upload_id(png)})")
        return _upload(image, bytes(png))
    raise ValueError(f"image id must start with 'sample:', 'synth:' or 'upload:', got {image!r}")


def render(recipe: Recipe | str | Mapping[str, Any], *, uploads: Uploads = None) -> Triplet:
    """Regenerate a triplet from its recipe (a :class:`Recipe`, its dict or its JSON).

    Returns:
        :class:`Triplet` with ``ref``, ``p0``, ``p1`` of shape ``(patch, patch, 3)``, float32 in ``[0, 1]``;
        the same recipe always gives the same bytes.

    Raises:
        ValueError: a malformed recipe, an unknown image, a crop outside the image, a bad step.
    """
    if isinstance(recipe, str):
        recipe = Recipe.from_json(recipe)
    elif not isinstance(recipe, Recipe):
        recipe = Recipe.from_dict(recipe)
    src = source_image(recipe.image, uploads=uploads)
    side = recipe.patch + 2 * recipe.margin
    h, w = src.shape[:2]
    if recipe.top + side > h or recipe.left + side > w:
        raise ValueError(f"crop at ({recipe.top}, {recipe.left}) of side {side} leaves the {w}×{h} image {recipe.image!r}")
    ctx = np.array(src[recipe.top:recipe.top + side, recipe.left:recipe.left + side], dtype=np.float32)
    m, p = recipe.margin, recipe.patch

    def cut(x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x[m:m + p, m:m + p], dtype=np.float32)

    return Triplet(cut(ctx), cut(_dist.chain(ctx, recipe.steps0)), cut(_dist.chain(ctx, recipe.steps1)), recipe)


# --------------------------------------------------------------------------- drawing a study
def _crop(src: np.ndarray, side: int, rng: np.random.Generator) -> tuple[int, int]:
    """A context corner whose patch is not flat (first of a few draws with luma std ≥ 0.06, else the busiest)."""
    h, w = src.shape[:2]
    if h < side or w < side:
        raise ValueError(f"the source image ({w}×{h}) is smaller than the {side} px context")
    best, best_std = None, -1.0
    for _ in range(_CROP_TRIES):
        top, left = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
        std = float((src[top:top + side, left:left + side] @ np.asarray(LUMA)).std())
        if std >= _MIN_STD:
            return top, left
        if std > best_std:
            best, best_std = (top, left), std
    return best


def make_recipes(
    n: int,
    *,
    families: Sequence[str],
    seed: int,
    images: Sequence[str] | None = None,
    uploads: Uploads = None,
) -> list[Recipe]:
    """Draw ``n`` triplet recipes, the families in turn (shuffled), the images at random.

    Args:
        n: number of triplets, 1 to 500.
        families: keys of :data:`FAMILIES`.
        seed: int ``>= 0``; the same arguments always give the same recipes.
        images: image ids to cut patches from (default: every sample photo).
        uploads: the bytes of any ``"upload:…"`` id in ``images``.

    Raises:
        ValueError: ``n`` out of range, an unknown family, no images, an image too small for a context.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= 500:
        raise ValueError(f"n must be an int in [1, 500], got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    families = list(families)
    if not families:
        raise ValueError("families must name at least one family")
    for f in families:
        if f not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {f!r}")
    images = list(images) if images is not None else sample_ids()
    if not images:
        raise ValueError("images must name at least one source image")
    rng = np.random.default_rng(int(seed))
    order = [families[i % len(families)] for i in range(int(n))]
    rng.shuffle(order)
    side = PATCH + 2 * MARGIN
    out = []
    for family in order:
        tseed = int(rng.integers(2**31 - 1))
        trng = np.random.default_rng(tseed)
        image = images[int(trng.integers(len(images)))]
        top, left = _crop(source_image(image, uploads=uploads), side, trng)
        s0, s1 = _steps(family, trng)
        out.append(Recipe(image, top, left, family, s0, s1, tseed))
    return out
