"""The choices the app offers and the pure logic over them (no Streamlit here).

The app's default configuration (:data:`DEFAULT_SPEC`: the sidebar's metric before anyone
changes it), the reference sources, the metrics a page can add beside the sidebar's
(:data:`EXTRA_SPECS`), and the content key of an upload.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lpips_core.caching import content_digest
from lpips_core.spec import MetricSpec, standard_specs

REPO = Path(__file__).resolve().parents[1]
SAMPLES_DIR = REPO / "sample_images"
DEFAULT_SAMPLE = "chelsea"
#: The longer side (px) sample photos and uploads are brought to; 256 keeps every page interactive on a CPU.
WORKING_SIDES = (128, 256, 384, 512)
DEFAULT_WORKING_SIDE = 256
UPLOAD_TYPES = ["png", "jpg", "jpeg", "webp", "bmp", "gif", "tif", "tiff"]
SYNTHETIC = ("texture patch", "stripes", "checkerboard", "grating", "gradient")

#: The sidebar's configuration before anyone changes it: LPIPS · AlexNet, v0.1, lin (the
#: reference package's default). The sidebar offers this metric's networks and versions.
DEFAULT_SPEC = MetricSpec("lpips")
#: The metrics a page can add beside the sidebar's: every other registered learned metric, on
#: each of its networks, at its own defaults (ST-LPIPS · AlexNet, ST-LPIPS · VGG16, DISTS · VGG16).
EXTRA_SPECS: tuple[MetricSpec, ...] = tuple(
    s for s in standard_specs(baselines=False) if s.learned and s.metric != DEFAULT_SPEC.metric)
#: On by default on a CPU: ST-LPIPS · AlexNet alone (the paper's main model, and cheap: about
#: 4 s for the Shift-vs-blur sweeps at 256 px on 2 cores, where ST-LPIPS · VGG16 takes about 15 s
#: and DISTS about 10 s). On a GPU every extra metric is on.
CPU_EXTRAS: tuple[MetricSpec, ...] = (MetricSpec("stlpips", net="alex"),)

#: The distortion the Conventions and Inside-a-layer pages use when the lab has none.
DEFAULT_CHAIN: list[tuple[str, dict[str, Any]]] = [("gaussian_blur", {"sigma": 1.5, "boundary": "reflect"})]


def default_extras(device: str) -> list[MetricSpec]:
    """The extra metrics on by default: :data:`CPU_EXTRAS` on a CPU, all of :data:`EXTRA_SPECS` elsewhere."""
    return list(CPU_EXTRAS) if str(device) == "cpu" else list(EXTRA_SPECS)


def upload_key(data: bytes, name: str, working_side: int) -> str:
    """What identifies an uploaded reference: its content digest
    (:func:`lpips_core.caching.content_digest`, 32 hex digits), its name (shown as the
    reference's label) and the working side it is brought to.

    Two different files with the same name and byte size get different keys; the same file
    uploaded again gets the same key (and is not decoded again).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    return f"{content_digest(data)}:{int(working_side)}:{name}"
