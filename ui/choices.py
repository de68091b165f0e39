"""The choices the app offers and the pure logic over them (no Streamlit here).

The sidebar's model configuration (:class:`AppConfig`), the reference sources, the successor
metrics a page can add beside LPIPS, and the content key of an upload.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .text import NET_LABELS, metric_label

REPO = Path(__file__).resolve().parents[1]
SAMPLES_DIR = REPO / "sample_images"
DEFAULT_SAMPLE = "chelsea"
#: The longer side (px) sample photos and uploads are brought to; 256 keeps every page interactive on a CPU.
WORKING_SIDES = (128, 256, 384, 512)
DEFAULT_WORKING_SIDE = 256
UPLOAD_TYPES = ["png", "jpg", "jpeg", "webp", "bmp", "gif", "tif", "tiff"]
SYNTHETIC = ("texture patch", "stripes", "checkerboard", "grating", "gradient")

#: The successor metrics a page can add beside LPIPS: id → (metric, net) of ``metric_registry``.
SUCCESSORS: dict[str, tuple[str, str]] = {
    "stlpips-alex": ("stlpips", "alex"),
    "stlpips-vgg": ("stlpips", "vgg"),
    "dists-vgg": ("dists", "vgg"),
}
#: On by default on a CPU: ST-LPIPS · AlexNet alone (the paper's main model, and cheap: about
#: 4 s for the Shift-vs-blur sweeps at 256 px on 2 cores, where ST-LPIPS · VGG16 takes about 15 s
#: and DISTS about 10 s). On a GPU every successor is on.
CPU_SUCCESSORS: tuple[str, ...] = ("stlpips-alex",)

#: The distortion the Conventions and Inside-a-layer pages use when the lab has none.
DEFAULT_CHAIN: list[tuple[str, dict[str, Any]]] = [("gaussian_blur", {"sigma": 1.5, "boundary": "reflect"})]


@dataclass(frozen=True)
class AppConfig:
    """The sidebar's model configuration: ``net`` (``"alex"``, ``"vgg"``, ``"squeeze"``),
    ``version`` (``"0.1"``, ``"0.0"``), ``lin`` and the resolved ``device`` (``"cpu"``, ``"cuda"``, …)."""

    net: str
    version: str
    lin: bool
    device: str

    @property
    def label(self) -> str:
        """``"AlexNet, v0.1, lin"`` / ``"VGG16, v0.0, baseline"``."""
        return f"{NET_LABELS[self.net]}, v{self.version}, {'lin' if self.lin else 'baseline'}"


def default_successors(device: str) -> list[str]:
    """The successors on by default: :data:`CPU_SUCCESSORS` on a CPU, all of them elsewhere."""
    return list(CPU_SUCCESSORS) if str(device) == "cpu" else list(SUCCESSORS)


def successor_label(sid: str) -> str:
    """``"ST-LPIPS · AlexNet"`` for ``"stlpips-alex"``."""
    return metric_label(*SUCCESSORS[sid])


def upload_key(data: bytes, name: str, working_side: int) -> str:
    """What identifies an uploaded reference: a BLAKE2b digest of its bytes (16 bytes, hex), its
    name (shown as the reference's label) and the working side it is brought to.

    Two different files with the same name and byte size get different keys; the same file
    uploaded again gets the same key (and is not decoded again).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    return f"{digest}:{int(working_side)}:{name}"
