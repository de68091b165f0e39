"""What the pages should show, recomputed with ``lpips_core`` in the test process.

The Distortion lab starts with one step, ``gaussian_blur`` at its ``ParamSpec`` defaults
(``app_pages/distortion_lab.py``: ``_init``/``_defaults``), applied to the sidebar's reference by
``ui.apply_chain`` (``lpips_explorer.distortions.chain``, then float32). The default reference is
the sample photo ``chelsea`` loaded by ``lpips_core.images.load_image(max_side=256)``
(``ui.init_state``/``ui.pair._sample``); uploads go through ``load_image(max_side=256, min_side=64)``
(``ui.reference_picker``). LPIPS is the sidebar's default configuration: v0.1, lin.
"""

from __future__ import annotations

import functools
import io

import numpy as np

from .driver import REPO

DEFAULT_SAMPLE = "chelsea"
WORKING_SIDE = 256
UPLOAD_MIN_SIDE = 64
NET_LABELS = {"alex": "AlexNet", "vgg": "VGG16", "squeeze": "SqueezeNet 1.1"}
#: The decimals the lab's values are compared at (its data grid's accessible table holds the raw
#: values; the grid shows four significant digits).
LAB_DECIMALS = 5


def lab_default_chain() -> list[tuple[str, dict]]:
    from lpips_explorer.distortions import PARAMS

    return [("gaussian_blur", {p: spec.default for p, spec in PARAMS["gaussian_blur"].items()})]


def lab_distorted(ref: np.ndarray) -> np.ndarray:
    from lpips_explorer.distortions import chain

    return chain(ref, lab_default_chain()).astype(np.float32)


def sample_reference() -> np.ndarray:
    from lpips_core.images import load_image

    return load_image(REPO / "sample_images" / f"{DEFAULT_SAMPLE}.png", max_side=WORKING_SIDE).array


def uploaded_reference(data: bytes, name: str) -> np.ndarray:
    from lpips_core.images import load_image

    src = io.BytesIO(data)
    src.name = name
    return load_image(src, max_side=WORKING_SIDE, min_side=UPLOAD_MIN_SIDE).array


def png_bytes(array: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of an ``(H, W, 3)`` float image in ``[0, 1]``."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.round(np.clip(array, 0, 1) * 255).astype(np.uint8), "RGB").save(buf, format="PNG")
    return buf.getvalue()


def available_nets() -> list[str]:
    from lpips_core import weights

    return [net for net in NET_LABELS if weights.availability(net)[0]]


@functools.cache
def _model(net: str, version: str, lin: bool):
    from lpips_core import LPIPS

    return LPIPS(net, version, lin, device="cpu")


def lpips(ref: np.ndarray, dist: np.ndarray, net: str, *, version: str = "0.1", lin: bool = True) -> float:
    """The reference-equivalent ``LPIPS(...)(x, y)`` (``forward``), independent of the app's sweep path."""
    from lpips_core.conventions import to_input

    return float(_model(net, version, lin).forward(to_input(ref), to_input(dist))[0])


def debug_score(reference: bytes, test: bytes, net: str = "alex", *, lin: bool = True) -> float:
    """Debug a score's LPIPS for two files as uploaded (native size, v0.1, lin unless told)."""
    from lpips_explorer.diagnostics import diagnose_files

    return diagnose_files(_model(net, "0.1", lin), reference, test).score
