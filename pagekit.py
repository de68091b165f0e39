"""Small Streamlit helpers shared by the teaching and debugging pages.

Reads widgets and session state, returns plain values; the work happens in ``lpips_core``.

Session state it owns:

- ``lab_chain``: the Distortion lab's current chain, a list of ``(name, params)`` steps (JSON-
  serialisable), so the Conventions and Inside-a-layer pages can use the lab's distorted image.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Sequence

import numpy as np
import streamlit as st

import ui
from lpips_core.distortions import chain

#: The distortion the Conventions and Inside-a-layer pages use when the lab has none.
DEFAULT_CHAIN: list[tuple[str, dict[str, Any]]] = [("gaussian_blur", {"sigma": 1.5, "boundary": "reflect"})]

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$])")


def md_escape(text: str) -> str:
    """Escape Markdown (and HTML) syntax so user-controlled text renders literally."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


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
