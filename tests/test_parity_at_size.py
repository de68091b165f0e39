"""Exact at every size: every head's reductions, and LPIPS on the single-pair API and on the folder
path against the reference ``lpips`` 0.1.4 package, at 256, 512, 1024 and 1000 × 750 px.

The reductions are checked on synthetic maps against a float64 sum: their relative error must not
grow with the number of positions. The parity grid feeds a real photograph (``sample_images/
astronaut.png``, resized) against a copy shifted by 3 px with Gaussian noise added, both saved as
8-bit PNGs, so that LPIPS is large (0.35 to 0.67) and an error relative to it shows. The folder
path runs ``score_pairs`` in two scoring lanes (worker processes on one torch thread: NNPACK,
NCHW taps) and in this process with NNPACK off (oneDNN, channels-last taps: the layout of a
process on two torch threads on an AVX-512 CPU, where a plain float32 mean over the positions
drifted low by 5.6e-5 at 1024 px).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from lpips_core import LPIPS
from lpips_core.conventions import to_input
from lpips_core.images import load_image
from lpips_core.model import np_position_mean
from lpips_core.spec import MetricSpec
from lpips_core.testing import reference_lpips

REPO = Path(__file__).resolve().parents[1]
ROOT_SIZES = (256, 512, 1024)


# --------------------------------------------------------------------------- reductions
def _maps(side: int, channels: int = 8, seed: int = 0) -> torch.Tensor:
    """``(2, C, side, side)`` float32 squared-difference-like maps: positive, spread over 4 decades."""
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(2, channels, side, side, generator=gen).pow_(4).mul_(0.01)


def _rel(got, want) -> float:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(got - want) / np.abs(want)))


@pytest.mark.parametrize("side", ROOT_SIZES)
@pytest.mark.parametrize("layout", ["channels-last", "nchw"])
def test_numpy_head_does_not_drift_with_size(side, layout):
    """The NumPy head's channel terms (``mean_hw((ŷ − x̂)²)`` per channel) are within 2e-7
    (relative) of float64 at every size and in both layouts. A plain float32 ``mean`` over the
    positions of channels-last maps drifts low, more the larger the map (on these maps −1.4e-5
    at 512², −1e-4 at 1024²): the defect this guards against."""
    from lpips_core.model import _np_channel_terms

    s = _maps(side).sqrt_()
    if layout == "channels-last":
        s = s.contiguous(memory_format=torch.channels_last)
    want = s.double().square().mean((2, 3)).numpy()
    plain = s.square().numpy().reshape(2, 8, -1).mean(-1)
    got = _np_channel_terms([torch.zeros_like(s)], [s.clone(memory_format=torch.preserve_format)], False)[0]
    assert _rel(got, want) < 2e-7
    assert _rel(np_position_mean(s.square().numpy()), want) < 2e-7
    if layout == "channels-last" and side >= 512:
        assert _rel(plain, want) > 1e-5


@pytest.mark.parametrize("side", ROOT_SIZES)
def test_torch_heads_do_not_drift_with_size(side):
    """The PyTorch heads reduce with PyTorch's cascade sum, whose error does not grow with the
    number of positions: LPIPS's terms (as ST-LPIPS's: the same code) with and without maps and
    its channel terms within 2e-7 of float64, and DISTS's terms (from means, variances and the
    covariance over all positions) within 1e-7 absolute of DISTS's own head run in float64 (each
    term is 1 minus a ratio near 1: that float32 subtraction, not the sums, bounds its relative
    error), at every size, on channels-last and NCHW maps and on one and two threads."""
    from lpips_core.dists import DISTS
    from lpips_core.protocol import Features

    lpips = LPIPS("alex", lin=False, device="cpu")
    dists = DISTS(device="cpu")
    dists64 = DISTS(device="cpu").double()
    base = _maps(side, seed=1).sqrt_()
    want = base.double().square().mean((2, 3))
    gen = torch.Generator().manual_seed(2)
    a = torch.rand(1, 3, side, side, generator=gen)
    b = (a + 0.1 * torch.rand(1, 3, side, side, generator=gen)).clamp_(0, 1)
    want_dists = dists64._terms([a.double()], [b.double()], spatial=False, size=(side, side))[0]
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            for fmt in (torch.contiguous_format, torch.channels_last):
                s = base.contiguous(memory_format=fmt)
                zero = torch.zeros_like(s)
                for spatial in (False, True):
                    per_layer = lpips._terms([zero], [s.clone()], spatial=spatial, size=(side, side))[0]
                    assert _rel(per_layer[:, 0], want.sum(1)) < 2e-7, (n, fmt, spatial)
                f = [Features((t,), (side, side), "alex", "0.1") for t in (zero, s)]
                assert _rel(lpips.channel_terms(*f)[0], want) < 2e-7
                got = dists._terms([a.contiguous(memory_format=fmt)], [b.contiguous(memory_format=fmt)],
                                   spatial=False, size=(side, side))[0]
                assert float((got - want_dists).abs().max()) < 1e-7, (n, fmt)  # measured ≤ 3e-8
    finally:
        torch.set_num_threads(threads)


# --------------------------------------------------------------------------- the parity grid
SIZES = {"256": (256, 256), "512": (512, 512), "1024": (1024, 1024), "1000x750": (750, 1000)}
# the VGG16 cells past 256 px take 10-60 s each on two cores: full tier
SLOW = {("vgg", "512"), ("vgg", "1024"), ("vgg", "1000x750")}


def _cells(paths=None):
    for net in ("alex", "vgg"):
        for size in SIZES:
            for path in paths or (None,):
                marks = [pytest.mark.slow] if (net, size) in SLOW else []
                yield pytest.param(net, size, *(() if path is None else (path,)), marks=marks,
                                   id="-".join([net, size] + ([path] if path else [])))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """``size → (a, b)``: ``a/p.png`` the astronaut at ``size``; ``b/p.png`` it shifted right by
    3 px (edge repeated) with Gaussian noise (σ = 0.08), both 8-bit; written on first use."""
    root = tmp_path_factory.mktemp("parity")
    made: dict[str, tuple[Path, Path]] = {}

    def get(size: str) -> tuple[Path, Path]:
        if size not in made:
            h, w = SIZES[size]
            img = load_image(REPO / "sample_images" / "astronaut.png").array
            a = to_input(img, convention="[0,1]", size=(h, w))[0].permute(1, 2, 0).numpy()
            b = np.concatenate([np.repeat(a[:, :1], 3, axis=1), a[:, :-3]], axis=1)
            b = b + np.random.default_rng(h * w).normal(0.0, 0.08, a.shape)
            for name, arr in (("a", a), ("b", b)):
                (root / size / name).mkdir(parents=True)
                Image.fromarray(np.round(np.clip(arr, 0, 1) * 255).astype(np.uint8)).save(root / size / name / "p.png")
            made[size] = (root / size / "a", root / size / "b")
        return made[size]

    return get


def _inputs(dirs: tuple[Path, Path]) -> tuple[torch.Tensor, torch.Tensor]:
    return tuple(to_input(load_image(d / "p.png", max_side=None).array) for d in dirs)


@functools.lru_cache(maxsize=None)
def _models(net: str):
    return LPIPS(net, device="cpu"), reference_lpips(net)


_REFERENCE: dict[tuple[str, str], float] = {}


def _reference(net: str, size: str, dirs: tuple[Path, Path]) -> float:
    """The reference package's LPIPS of the pair (computed once per network and size)."""
    if (net, size) not in _REFERENCE:
        x, y = _inputs(dirs)
        with torch.no_grad():
            _REFERENCE[(net, size)] = float(_models(net)[1](x, y))
    return _REFERENCE[(net, size)]


def _close(got: float, want: float, size: str) -> None:
    """Within 1e-5 absolute and relative; at 256 px within 1e-7 absolute (a few float32 units in the
    last place of a value near 0.4, whose unit is 3e-8)."""
    diff = abs(got - want)
    ok = diff <= 1e-7 if size == "256" else (diff <= 1e-5 and diff <= 1e-5 * abs(want))
    assert ok, (size, got, want, got - want)


@pytest.mark.parametrize("net, size", list(_cells()))
def test_single_pair_api_equals_the_reference_at_size(net, size, folders):
    """``model(x, y)`` and ``compare`` equal the reference within 1e-5 absolute and relative at
    512, 1024 and 1000 × 750 px, and within 1e-7 absolute at 256 px (measured ≤ 6e-8 at every size)."""
    ours = _models(net)[0]
    x, y = _inputs(folders(size))
    want = _reference(net, size, folders(size))
    assert want > 0.3  # a large distance: the relative bound means something
    _close(float(ours(x, y)), want, size)
    _close(float(ours.compare(x, y, spatial=False).total[0]), want, size)


@pytest.mark.parametrize("net, size, path", list(_cells(("lanes", "one-process"))))
def test_folder_path_equals_the_reference_at_size(net, size, path, folders, monkeypatch):
    """``score_pairs`` (what ``python -m lpips_core score`` runs) equals the reference within
    1e-5 absolute and relative at 512, 1024 and 1000 × 750 px, and within 1e-7 absolute at 256 px
    (as the single-pair API), in scoring lanes and in one process on oneDNN's channels-last taps."""
    from lpips_core import backbones
    from lpips_core.datasets import Scorer, match_folders, score_pairs

    ours = _models(net)[0]
    scorer = Scorer([f"lpips-{net}"], device="cpu", models={MetricSpec("lpips", net, "0.1"): ours})
    if path == "lanes":
        res = score_pairs(match_folders(*folders(size)), scorer=scorer, lanes=2)
    else:
        monkeypatch.setattr(backbones, "USE_NNPACK", False)
        res = score_pairs(match_folders(*folders(size)), scorer=scorer, workers=0)
    assert [r["error_kind"] for r in res.rows] == [""]
    _close(res.rows[0][scorer.names[0]], _reference(net, size, folders(size)), size)
