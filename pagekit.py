"""Small Streamlit helpers shared by the teaching and debugging pages.

Reads widgets and session state, returns plain values; the work happens in ``lpips_core``.

Session state it owns:

- ``lab_chain``: the Distortion lab's current chain, a list of ``(name, params)`` steps (JSON-
  serialisable), so the Conventions and Inside-a-layer pages can use the lab's distorted image.
- ``successors``: the successor metrics (ids of :data:`SUCCESSORS`) the Shift-vs-blur, Distortion
  lab and Conventions pages compute beside LPIPS; each page's own picker (``svb_successors``,
  ``lab_successors``, ``conv_successors``) reads and writes it, so the choice follows the user.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

import numpy as np
import streamlit as st

import ui
from lpips_core.distortions import chain

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

md_escape = ui.md_escape  # one definition, in ui (which pagekit imports)


def chain_key(steps: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """A canonical, hashable form of a chain (for caches)."""
    return json.dumps([[name, params] for name, params in steps], sort_keys=True, default=list)


def chain_label(steps: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """``"gaussian_blur(sigma=1.5) → jpeg(quality=30)"``; ``"no distortion"`` for an empty chain."""
    if not steps:
        return "no distortion"
    parts = []
    for name, params in steps:
        args = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()
                         if v is not None)
        parts.append(f"{name}({args})")
    return " → ".join(parts)


@st.cache_data(show_spinner=False, max_entries=24)
def apply_chain(image: np.ndarray, steps_json: str) -> np.ndarray:
    """:func:`lpips_core.distortions.chain` on ``image``, cached by content and chain."""
    steps = [(name, {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()})
             for name, params in json.loads(steps_json)]
    return chain(image, steps).astype(np.float32)


def current_pair() -> tuple[np.ndarray, str, np.ndarray, str]:
    """The pair the analysis pages study: ``(reference, its name, distorted, where it comes from)``.

    The distorted image is the Distortion lab's current chain applied to the sidebar's reference,
    or :data:`DEFAULT_CHAIN` when the lab has not been opened (or its chain is empty).
    """
    ref, name = ui.reference()
    steps = st.session_state.get("lab_chain")
    if steps:
        source = f"the Distortion lab's chain: {chain_label(steps)}"
    else:
        steps = DEFAULT_CHAIN
        source = f"the default distortion {chain_label(steps)} (set your own in the Distortion lab)"
    return ref, name, apply_chain(ref, chain_key(steps)), source


def verdict(metric: str, shifted: float, blurred: float, *, higher_is_better: bool = False) -> str:
    """Which copy ``metric`` calls closer to the reference, and by how much.

    For a distance (lower is closer: MSE, LPIPS) the factor is the ratio of the two distances;
    for a similarity (``higher_is_better``, e.g. SSIM) the two values are quoted instead.
    """
    if not (math.isfinite(shifted) and math.isfinite(blurred)):
        return f"{metric} cannot compare the copies"
    if shifted == blurred:
        return f"{metric} calls both copies equally close"
    if higher_is_better:
        closer, hi, lo = ("shifted", shifted, blurred) if shifted > blurred else ("blurred", blurred, shifted)
        return f"{metric} prefers the {closer} copy ({hi:.3f} vs {lo:.3f})"
    closer, lo, hi = ("shifted", shifted, blurred) if shifted < blurred else ("blurred", blurred, shifted)
    if lo <= 0:
        return f"{metric} calls the {closer} copy identical to the reference"
    return f"{metric} calls the {closer} copy {hi / lo:.1f}× closer"


# --------------------------------------------------------------------------- successor metrics
def default_successors(device: str) -> list[str]:
    """The successors on by default: :data:`CPU_SUCCESSORS` on a CPU, all of them elsewhere."""
    return list(CPU_SUCCESSORS) if str(device) == "cpu" else list(SUCCESSORS)


def successor_label(sid: str) -> str:
    """``"ST-LPIPS · AlexNet"`` for ``"stlpips-alex"``."""
    return ui.metric_label(*SUCCESSORS[sid])


def successor_picker(key: str) -> list[str]:
    """The "Successor metrics" multiselect (widget ``key``), shared across pages; returns the chosen ids.

    The choice lives in ``st.session_state["successors"]`` (default :func:`default_successors`
    for the device), so it survives switching pages although each page has its own widget.
    """
    ss = st.session_state
    device = ui.app_config().device
    if "successors" not in ss:
        ss["successors"] = default_successors(device)
    ss[key] = [sid for sid in ss["successors"] if sid in SUCCESSORS]

    def _keep() -> None:
        ss["successors"] = list(ss[key])

    def _label(sid: str) -> str:
        ok, _ = ui.metric_status(*SUCCESSORS[sid])
        return successor_label(sid) + ("" if ok else " (unavailable)")

    st.multiselect(
        "Successor metrics", list(SUCCESSORS), key=key, on_change=_keep, format_func=_label,
        help="Shift-tolerant LPIPS (Ghildyal and Liu, 2022) and DISTS (Ding et al., 2022), on the same "
             "pair. The choice is shared by the Shift vs blur, Distortion lab and Conventions pages.",
    )
    if device == "cpu":
        st.caption("On a CPU only ST-LPIPS · AlexNet is on by default: each VGG-based successor adds about "
                   "10–15 s to a page's first run here (results are cached after); on a GPU all are on.")
    else:
        st.caption(f"On this {_device_word(device)} every successor is on by default; results are cached.")
    return list(ss[key])


def _device_word(device: str) -> str:
    return "GPU" if str(device).startswith("cuda") else str(device).upper()


def successor_models(chosen: Sequence[str], *, quiet: bool = False) -> dict[str, Any]:
    """``id → model`` for the chosen successors; ``None`` for one whose weights are unavailable
    (after a warning with the reason and the fix, unless ``quiet``)."""
    return {sid: ui.get_metric_model(*SUCCESSORS[sid], quiet=quiet) for sid in chosen}
