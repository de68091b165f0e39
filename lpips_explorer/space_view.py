"""What the "LPIPS space" page shows, computed without Streamlit: a 2-D map of a set, its closest
and farthest pairs, thumbnails.

- :func:`map_coordinates`: metric MDS (scikit-learn) of ``√d``, the Euclidean distance between
  the images' LPIPS embeddings (``d`` itself is a *squared* distance; MDS places points so that
  their plane distances match the given ones), started from classical MDS, so the same matrix
  always gives the same map.
- :func:`extreme_pairs`: the closest and the farthest pair of distinct images.
- :func:`thumbnail`: a small PNG data URI of an image, for the map and the strips.
- :func:`analyse_set`: all of it for one folder (one embedding, one distance matrix).
- :func:`reference_diversity`: the diversity of two sets made here, for scale beside a set's own
  (:data:`REFERENCE_SETS`): one image with faint noise (near-duplicates: close to 0) and
  independent noise images; :func:`group_diversity`: one folder's diversity within a view.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np

from lpips_explorer.figures.maps import png_data_uri

__all__ = ["REFERENCE_SETS", "SpaceView", "analyse_set", "extreme_pairs", "group_diversity", "map_coordinates",
           "reference_diversity", "reference_images", "set_diversity", "thumbnail"]

#: The sets :func:`reference_diversity` makes, by name: near-duplicates of one image (a synthetic
#: texture, each copy with its own Gaussian noise of σ = 0.01), and independent uniform noise images.
REFERENCE_SETS = ("one image, faint noise", "independent noise")


def map_coordinates(d: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """``(N, 2)`` plane coordinates whose distances approximate ``√d`` (metric MDS, scikit-learn).

    Args:
        d: ``(N, N)`` LPIPS distances (symmetric, zero diagonal, ``≥ 0``).

    Raises:
        ValueError: not a square matrix, or negative or non-finite entries.
    """
    from sklearn.manifold import MDS

    d = np.asarray(d, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"expected a square distance matrix, got shape {d.shape}")
    if not np.isfinite(d).all() or (d < 0).any():
        raise ValueError("distances must be finite and non-negative")
    n = d.shape[0]
    if n == 1:
        return np.zeros((1, 2))
    if n == 2:
        return np.array([[0.0, 0.0], [float(np.sqrt(d[0, 1])), 0.0]])
    r = np.sqrt((d + d.T) / 2)
    params = inspect.signature(MDS).parameters
    if "metric_mds" in params:  # scikit-learn ≥ 1.8
        mds = MDS(n_components=2, metric_mds=True, metric="precomputed", init="classical_mds", random_state=seed,
                  normalized_stress="auto")
    else:  # pragma: no cover - older scikit-learn
        mds = MDS(n_components=2, dissimilarity="precomputed", random_state=seed, n_init=4)
    return mds.fit_transform(r)


def extreme_pairs(d: np.ndarray) -> tuple[tuple[int, int], tuple[int, int]]:
    """``((i, j) closest, (i, j) farthest)`` over pairs ``i < j`` (ties: the first in row order)."""
    d = np.asarray(d, dtype=np.float64)
    n = d.shape[0]
    if n < 2:
        raise ValueError(f"pairs need at least 2 images, got {n}")
    iu = np.triu_indices(n, 1)
    vals = d[iu]
    lo, hi = int(np.argmin(vals)), int(np.argmax(vals))
    return (int(iu[0][lo]), int(iu[1][lo])), (int(iu[0][hi]), int(iu[1][hi]))


def thumbnail(image: np.ndarray, side: int = 64) -> str:
    """``image`` (``(H, W, 3)`` float in ``[0, 1]``) with its longer side ``side`` px, as a PNG data URI."""
    from PIL import Image

    from lpips_explorer.figures.maps import to_uint8

    img = Image.fromarray(to_uint8(image))
    scale = side / max(img.size)
    if scale < 1:
        img = img.resize((max(1, round(img.size[0] * scale)), max(1, round(img.size[1] * scale))), Image.BILINEAR)
    return png_data_uri(np.asarray(img))


# --------------------------------------------------------------------------- one set, analysed
@dataclass(frozen=True)
class SpaceView:
    """Everything the page shows about one set (see :func:`analyse_set`).

    Attributes:
        names: the images, relative to the folder, sorted; ``groups``: each one's top folder.
        d: ``(N, N)`` LPIPS distances; ``stats``: :func:`lpips_core.space.jackknife_interval`.
        xy: ``(N, 2)`` the map; ``thumbs``: PNG data URIs.
        nn_index, nn_distance: ``(N, k)`` each image's nearest others (self left out).
        pairs: ``{"closest": …, "farthest": …}``, each ``{"i", "j", "d", "a", "b", "map"}``
            (``a``, ``b``: the images at the working size, ``(H, W, 3)`` in ``[0, 1]``; ``map``:
            the pair's spatial LPIPS, ``(H, W)``, whose mean is ``d``).
        spec: the configuration's name; ``input_size``: ``[H, W]``; ``skipped``: unreadable files.
    """

    names: list[str]
    groups: list[str]
    d: np.ndarray
    stats: dict
    xy: np.ndarray
    thumbs: list[str]
    nn_index: np.ndarray
    nn_distance: np.ndarray
    pairs: dict
    spec: str
    input_size: list[int]
    skipped: list[dict]


def _working(spec, path) -> np.ndarray:
    """The image at ``path`` in ``[0, 1]`` at the working size of ``spec``, ``(H, W, 3)``."""
    from lpips_core.conventions import resize, to_tensor
    from lpips_core.images import load_image

    x = to_tensor(load_image(path, max_side=None).array)
    return resize(x, spec.size)[0].clamp(0, 1).permute(1, 2, 0).numpy()


def analyse_set(model, folder, spec, *, k: int = 10, max_images: int = 400, memory_budget: int = 512 << 20,
                progress=None) -> SpaceView:
    """Embed every image of ``folder`` once and derive the page's view of the set.

    Raises:
        ValueError: more than ``max_images`` images, fewer than 2 readable ones, images of
            different sizes without a working size, embeddings over ``memory_budget``.
    """
    from pathlib import Path

    import torch

    from lpips_core import metric_registry, space

    files, _ = space.image_files(folder)
    if len(files) > max_images:
        raise ValueError(f"the folder has {len(files)} images; this page maps at most {max_images} "
                         "(use `python -m lpips_core diversity` / `neighbours` for more)")
    emb = space.embed(model, folder, spec=spec, memory_budget=memory_budget, threads=1, progress=progress)
    if len(emb) < 2:
        raise ValueError(f"the folder has {len(emb)} readable image(s); a map needs at least 2")
    d = space.pairwise_distances(emb)
    stats = space.jackknife_interval(d)
    k = min(k, len(emb) - 1)
    nn = space.nearest(emb, emb, k)
    root = Path(folder)
    thumbs = [thumbnail(_working(spec, root / n)) for n in emb.names]
    closest, farthest = extreme_pairs(d)
    pairs = {}
    for label, (i, j) in (("closest", closest), ("farthest", farthest)):
        a, b = _working(spec, root / emb.names[i]), _working(spec, root / emb.names[j])
        opts = dict(convention=spec.convention, grayscale=spec.grayscale, device=model.device)
        with torch.inference_mode():
            res = model.compare(metric_registry.prepare_input(spec.metric, a, **opts),
                                metric_registry.prepare_input(spec.metric, b, **opts), spatial=True)
        pairs[label] = {"i": i, "j": j, "d": float(d[i, j]), "a": a, "b": b,
                        "map": res.spatial_map[0].cpu().numpy()}
    groups = [n.split("/", 1)[0] if "/" in n else "" for n in emb.names]
    return SpaceView(list(emb.names), groups, d, stats, map_coordinates(d), thumbs, nn.indices, nn.distances,
                     pairs, emb.spec_name, emb.manifest["input_size"], emb.skipped)


# --------------------------------------------------------------------------- diversity for scale
def reference_images(hw: tuple[int, int], *, n: int = 6, seed: int = 0) -> dict[str, list[np.ndarray]]:
    """The two sets of :data:`REFERENCE_SETS`, ``n`` images each of ``hw`` = ``(H, W)``, ``(H, W, 3)``
    float32 in ``[0, 1]``, seeded (the same ``hw`` and ``seed`` give the same images)."""
    from lpips_explorer.synth import texture_patch

    h, w = (int(v) for v in hw)
    if h < 1 or w < 1 or n < 2:
        raise ValueError(f"need a size of at least 1×1 px and n ≥ 2, got {hw} and {n}")
    rng = np.random.default_rng(seed)
    base = texture_patch(seed, size=max(h, w))[:h, :w]
    near = [np.clip(base + 0.01 * rng.standard_normal(base.shape), 0, 1).astype(np.float32) for _ in range(n)]
    noise = [rng.random((h, w, 3)).astype(np.float32) for _ in range(n)]
    return dict(zip(REFERENCE_SETS, (near, noise)))


def set_diversity(model, spec, images, *, batch_pixels: int = 1 << 19) -> float:
    """The mean LPIPS over all pairs of ``images`` (``(H, W, 3)`` in ``[0, 1]``, one size) under
    ``spec``'s input convention and working size; the pairs go through the model in batches of at
    most ``batch_pixels`` pixels per side of the pair (bounded memory at any size)."""
    import torch

    from lpips_core import metric_registry
    from lpips_core.conventions import resize, to_tensor

    if len(images) < 2:
        raise ValueError(f"a diversity needs at least 2 images, got {len(images)}")
    opts = dict(convention=spec.convention, grayscale=spec.grayscale, device=model.device)
    x = torch.cat([metric_registry.prepare_input(spec.metric, resize(to_tensor(im), spec.size)[0].permute(1, 2, 0)
                                                 .numpy(), **opts) for im in images])
    i, j = np.triu_indices(len(images), 1)
    step = max(1, batch_pixels // (x.shape[-2] * x.shape[-1]))
    with torch.inference_mode():
        d = torch.cat([model(x[i[k:k + step]], x[j[k:k + step]]) for k in range(0, len(i), step)])
    return float(d.double().mean())


def reference_diversity(model, spec, hw: tuple[int, int], *, n: int = 6, seed: int = 0) -> dict[str, float]:
    """Each set of :func:`reference_images` at ``hw`` → its diversity (:func:`set_diversity`) under
    ``spec``: where a set's own diversity sits between near-duplicates (close to 0) and noise."""
    return {name: set_diversity(model, spec, images) for name, images in reference_images(hw, n=n, seed=seed).items()}


def group_diversity(view: SpaceView, group: str) -> float:
    """The mean distance over the pairs of ``view``'s images in ``group`` (their top folder)."""
    rows = [i for i, g in enumerate(view.groups) if g == group]
    if len(rows) < 2:
        raise ValueError(f"the group {group!r} has {len(rows)} image(s); a diversity needs at least 2")
    sub = np.asarray(view.d)[np.ix_(rows, rows)]
    return float(sub[np.triu_indices(len(rows), 1)].mean())
