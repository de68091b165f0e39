"""A transform-ensembled LPIPS: E-LPIPS's random input transformations on our LPIPS-VGG weights.

Kettunen, Härkönen and Lehtinen (2019, "E-LPIPS: robust perceptual image similarity via random
transformation ensembles", arXiv 1906.03973) define the distance as the *expectation* of an
LPIPS-VGG distance over random transformations applied identically to both images. This module
samples their transformations, in their order, on images in ``[0, 1]``:

1. **Downscaling** by an integer factor ``s ∈ {1, …, S}`` drawn with probability ``∝ 1/s²``
   (``S = max(1, min(H, W) // 64)`` by default, capped at 8: each scale keeps ≥ 64 px); the image
   is reflect-padded to a multiple of ``s`` with a random offset in ``[0, s)`` on each axis, then
   box-averaged in ``s × s`` blocks.
2. **Translation** by integer offsets ``(oy, ox) ∈ {0, …, 7}²``: reflect padding of ``7 − o`` before
   and ``o`` after on each axis (the image grows by 7 px; both images get the same padding).
3. **Flip**: none, left–right, up–down or both, each with probability ¼.
4. **Axis swap** (transpose) with probability ½.
5. **Colour-channel permutation**: one of the six, uniformly.
6. **Colour scaling**: each channel multiplied by ``0.2 + 0.8·u``, ``u ~ U(0, 1)`` (``colour="color"``,
   the paper's default) or one factor for all three (``colour="brightness"``).

The transformed images are mapped back to ``[-1, 1]`` and compared by :class:`~lpips_core.model.LPIPS`
``("vgg")`` (v0.1, lin). One transformation is drawn per sample and applied to the whole batch.

**This is not the published E-LPIPS model.** E-LPIPS also changes the network (average instead of
max pooling, dropout at keep probability 0.99, lin weights on every VGG layer including the input)
and ships its own weights, which we do not have. This class applies E-LPIPS's *transformations* to
the LPIPS-VGG weights we ship. Kettunen et al. suggest one random sample per training step and at
least 300 for a precise evaluation (the reference documents, "Variants").

Example::

    >>> from lpips_core import LPIPS
    >>> from lpips_core.elpips import ELPIPS
    >>> metric = ELPIPS(LPIPS("vgg"), seed=0)           # share an existing (cached) model
    >>> loss = metric(x, y).mean()                       # one random transformation: a loss
    >>> est = metric.evaluate(x, y, samples=300, seed=1) # mean ± standard error
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .model import LPIPS
from .protocol import check_input

__all__ = ["ELPIPS", "ELPIPSEstimate", "OFFSET_MAX", "Transform", "apply_transform", "default_scales",
           "sample_transform"]

#: E-LPIPS's largest translation, in pixels (offsets are drawn from ``0 … OFFSET_MAX``).
OFFSET_MAX = 7
#: The paper's largest number of scale levels.
MAX_SCALES = 8
_PERMUTATIONS = tuple(itertools.permutations(range(3)))
ColourMode = Literal["color", "brightness"]


@dataclass(frozen=True)
class Transform:
    """One random transformation, applied identically to both images of a pair.

    Attributes:
        scale: the integer downscaling factor (1: none).
        scale_offset: ``(dy, dx)`` in ``[0, scale)``: where the box-averaging grid starts.
        offset: ``(oy, ox)`` in ``[0, offset_max]``: the translation.
        flip: 0 none, 1 left–right, 2 up–down, 3 both.
        swap: transpose the two spatial axes.
        permutation: the new order of the colour channels.
        colour: the three channel factors, each in ``[0.2, 1.0]``.
    """

    scale: int
    scale_offset: tuple[int, int]
    offset: tuple[int, int]
    flip: int
    swap: bool
    permutation: tuple[int, int, int]
    colour: tuple[float, float, float]


def default_scales(height: int, width: int) -> int:
    """E-LPIPS's number of scale levels for an image: ``max(1, min(H, W) // 64)``, at most 8."""
    return max(1, min(MAX_SCALES, min(height, width) // 64))


def _randint(high: int, g: torch.Generator) -> int:
    return int(torch.randint(high, (1,), generator=g))


def sample_transform(
    generator: torch.Generator, *, scales: int = 1, offset_max: int = OFFSET_MAX, colour: ColourMode = "color"
) -> Transform:
    """Draw one E-LPIPS transformation from ``generator`` (a CPU :class:`torch.Generator`).

    Args:
        scales: the number of scale levels ``S`` (factor ``s`` drawn with probability ``∝ 1/s²``).
        offset_max: the largest translation (E-LPIPS: 7).
        colour: ``"color"`` (a factor per channel) or ``"brightness"`` (one factor).
    """
    probs = torch.tensor([1.0 / s**2 for s in range(1, scales + 1)], dtype=torch.float64)
    scale = int(torch.multinomial(probs, 1, generator=generator)) + 1
    scale_offset = (_randint(scale, generator), _randint(scale, generator))
    offset = (_randint(offset_max + 1, generator), _randint(offset_max + 1, generator))
    flip = _randint(4, generator)
    swap = bool(_randint(2, generator))
    permutation = _PERMUTATIONS[_randint(len(_PERMUTATIONS), generator)]
    u = torch.rand(3, generator=generator, dtype=torch.float64)
    if colour == "brightness":
        u = u[:1].expand(3)
    factors = tuple(float(0.2 + 0.8 * v) for v in u)
    return Transform(scale, scale_offset, offset, flip, swap, permutation, factors)  # type: ignore[arg-type]


def apply_transform(x01: torch.Tensor, t: Transform, *, offset_max: int = OFFSET_MAX) -> torch.Tensor:
    """Apply ``t`` to ``x01``: ``(N, 3, H, W)`` in ``[0, 1]`` → ``(N, 3, H', W')`` in ``[0, 1]``.

    ``H' = ceil((H + s − 1) / s) + offset_max`` when downscaled by ``s > 1`` (``H + offset_max`` when
    not); ``H'`` and ``W'`` trade places when ``t.swap``. Differentiable; no in-place operations.
    """
    x = x01
    if t.scale > 1:
        s = t.scale
        h, w = x.shape[-2:]
        full_h = (h + 2 * (s - 1)) // s * s
        full_w = (w + 2 * (s - 1)) // s * s
        dy, dx = t.scale_offset
        x = F.pad(x, (dx, full_w - w - dx, dy, full_h - h - dy), mode="reflect")
        x = F.avg_pool2d(x, s)
    oy, ox = t.offset
    x = F.pad(x, (offset_max - ox, ox, offset_max - oy, oy), mode="reflect")
    dims = {0: (), 1: (-1,), 2: (-2,), 3: (-2, -1)}[t.flip]
    if dims:
        x = torch.flip(x, dims)
    if t.swap:
        x = x.transpose(-2, -1)
    x = x[:, list(t.permutation)]
    return x * torch.tensor(t.colour, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)


@dataclass(frozen=True)
class ELPIPSEstimate:
    """A Monte-Carlo estimate of the ensembled distance.

    Attributes:
        mean: ``(N,)`` the mean over the samples.
        stderr: ``(N,)`` its standard error, ``std(values, ddof=1) / √samples``.
        values: ``(samples, N)`` the distance under each sampled transformation.
        samples, seed: how it was drawn (the same seed gives the same values).
    """

    mean: torch.Tensor
    stderr: torch.Tensor
    values: torch.Tensor
    samples: int
    seed: int


class ELPIPS(nn.Module):
    """E-LPIPS's random transformations applied to LPIPS-VGG (v0.1, lin): NOT the published E-LPIPS.

    ``d(x, y) = E_T[ LPIPS_VGG(T(x), T(y)) ]`` with ``T`` drawn as the module docstring lists.
    The published E-LPIPS also changes the network and ships its own weights, which we do not
    have; this is their transformations on our LPIPS-VGG weights.

    Args:
        model: an :class:`~lpips_core.model.LPIPS` ``("vgg")`` model, version 0.1, lin (share the
            app's cached one); ``None`` builds one (slow: build once).
        samples: transformations averaged per :meth:`forward` call (1 when used as a loss: a fresh
            random transformation every step).
        seed: seeds this module's :class:`torch.Generator` (see :meth:`reseed`).
        scales: scale levels ``S``; ``None`` → :func:`default_scales` of each input's size.
        offset_max: the largest translation in pixels (E-LPIPS: 7).
        colour: ``"color"`` (per-channel factors, E-LPIPS's default) or ``"brightness"``.
        device: where a model built here runs (ignored when ``model`` is given).

    Inputs are ``(N, 3, H, W)`` float in ``[-1, 1]``, like LPIPS (:attr:`input_range`).

    Raises:
        TypeError: ``model`` is not an LPIPS model. ValueError: not VGG16, v0.1, lin; bad options.
    """

    input_range = "[-1,1]"

    def __init__(self, model: LPIPS | None = None, *, samples: int = 1, seed: int = 0, scales: int | None = None,
                 offset_max: int = OFFSET_MAX, colour: ColourMode = "color", device: torch.device | str | None = None):
        super().__init__()
        if model is None:
            model = LPIPS("vgg", device=device)
        if not isinstance(model, LPIPS):
            raise TypeError(f"model must be an lpips_core LPIPS model, got {type(model).__name__}")
        if (model.net, model.version, model.lin) != ("vgg", "0.1", True):
            raise ValueError("ELPIPS needs LPIPS('vgg') version 0.1 with lin weights, got "
                             f"net={model.net!r}, version={model.version!r}, lin={model.lin}")
        _check_count("samples", samples)
        if scales is not None:
            _check_count("scales", scales)
            if scales > MAX_SCALES:
                raise ValueError(f"scales must be at most {MAX_SCALES}, got {scales}")
        if not isinstance(offset_max, int) or offset_max < 0:
            raise ValueError(f"offset_max must be an int ≥ 0, got {offset_max!r}")
        if colour not in ("color", "brightness"):
            raise ValueError(f"colour must be 'color' or 'brightness', got {colour!r}")
        self.model = model
        self.samples = samples
        self.scales = scales
        self.offset_max = offset_max
        self.colour = colour
        self.generator = torch.Generator()
        self.reseed(seed)

    @property
    def device(self) -> torch.device:
        return self.model.device

    def reseed(self, seed: int) -> None:
        """Restart the random transformations: the same seed gives the same sequence of values."""
        if not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        self.seed = seed
        self.generator.manual_seed(seed)

    def extra_repr(self) -> str:
        return (f"samples={self.samples}, seed={self.seed}, scales={self.scales}, offset_max={self.offset_max}, "
                f"colour={self.colour!r} (E-LPIPS transformations on LPIPS-VGG v0.1 lin; not the published E-LPIPS)")

    def sample(self, height: int, width: int, generator: torch.Generator | None = None) -> Transform:
        """One transformation for ``height × width`` inputs, from ``generator`` (default: the module's)."""
        scales = self.scales if self.scales is not None else default_scales(height, width)
        return sample_transform(generator or self.generator, scales=scales, offset_max=self.offset_max,
                                colour=self.colour)

    def distance(self, x: torch.Tensor, y: torch.Tensor, t: Transform) -> torch.Tensor:
        """``(N,)`` LPIPS-VGG of the pair under one transformation ``t`` (inputs in ``[-1, 1]``);
        differentiable when autograd is enabled and an input requires grad."""
        tx = apply_transform((x + 1) * 0.5, t, offset_max=self.offset_max) * 2 - 1
        ty = apply_transform((y + 1) * 0.5, t, offset_max=self.offset_max) * 2 - 1
        return self.model(tx, ty)

    def _check(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = check_input(x, self.device, name="x", dtype=self.model.dtype)
        y = check_input(y, self.device, name="y", dtype=self.model.dtype)
        if x.shape[-2:] != y.shape[-2:]:
            raise ValueError(f"x and y must have the same size, got {tuple(x.shape)} and {tuple(y.shape)}")
        if x.shape[0] != y.shape[0] and 1 not in (x.shape[0], y.shape[0]):
            raise ValueError(f"batch sizes {x.shape[0]} and {y.shape[0]} do not broadcast")
        return x, y

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``(N,)``: the mean over :attr:`samples` fresh transformations from the module's generator.

        ``x``, ``y``: ``(N, 3, H, W)`` float in ``[-1, 1]`` (a batch of 1 broadcasts against N).
        Differentiable with respect to both when autograd is enabled and either requires grad.
        Successive calls draw new transformations; :meth:`reseed` restarts the sequence.
        """
        x, y = self._check(x, y)
        total = 0
        for _ in range(self.samples):
            total = total + self.distance(x, y, self.sample(*x.shape[-2:]))
        return total / self.samples

    @torch.no_grad()
    def evaluate(self, x: torch.Tensor, y: torch.Tensor, *, samples: int = 300, seed: int = 0) -> ELPIPSEstimate:
        """Monte-Carlo estimate with its standard error, from a fresh generator seeded with ``seed``
        (the module's own generator is left untouched). 300 samples by default, the paper's
        suggestion for a precise evaluation.

        Raises:
            ValueError: ``samples < 2`` (no standard error from one sample), bad inputs.
        """
        _check_count("samples", samples)
        if samples < 2:
            raise ValueError(f"evaluate needs samples ≥ 2 for a standard error, got {samples}")
        x, y = self._check(x, y)
        g = torch.Generator()
        g.manual_seed(int(seed))
        values = torch.stack([self.distance(x, y, self.sample(*x.shape[-2:], g)).float().cpu()
                              for _ in range(samples)])
        return ELPIPSEstimate(values.mean(0), values.std(0, unbiased=True) / math.sqrt(samples), values,
                              samples, int(seed))


def _check_count(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an int ≥ 1, got {value!r}")
