"""The reference image every page shares, and the distorted pair the analysis pages study.

The reference lives in session state (:data:`ui.state.REF_IMAGE`, ``REF_NAME``, ``REF_NOTICES``):
``(H, W, 3)`` float32 in ``[0, 1]``, chosen once in the sidebar (a sample photo, an upload or a
synthetic image; the picker is :func:`ui.widgets.reference_picker`).
"""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np
import streamlit as st

from lpips_explorer.distortions import chain

from . import state
from .choices import DEFAULT_CHAIN, DEFAULT_SAMPLE, DEFAULT_SPEC, DEFAULT_WORKING_SIDE, SAMPLES_DIR
from .text import chain_key, chain_label


def init_state() -> None:
    """Set the sidebar's defaults and the default reference (the sample photo) on a session's first run."""
    ss = st.session_state
    ss.setdefault(state.NET, DEFAULT_SPEC.net)
    ss.setdefault(state.VERSION, DEFAULT_SPEC.version)
    ss.setdefault(state.LIN, DEFAULT_SPEC.lin)
    ss.setdefault(state.WORKING_SIDE, DEFAULT_WORKING_SIDE)
    if state.REF_IMAGE not in ss:
        set_reference(*_sample(DEFAULT_SAMPLE, ss[state.WORKING_SIDE]), notices=())


def working_side() -> int:
    """The longer side (px) photos and uploads are brought to (the sidebar's choice)."""
    return int(st.session_state.get(state.WORKING_SIDE, DEFAULT_WORKING_SIDE))


def sample_names() -> list[str]:
    """The sample photos' names (``sample_images/*.png`` stems), sorted."""
    return sorted(p.stem for p in SAMPLES_DIR.glob("*.png"))


@st.cache_data(show_spinner=False, max_entries=32)
def _sample(name: str, side: int) -> tuple[np.ndarray, str]:
    from lpips_core.images import load_image

    loaded = load_image(SAMPLES_DIR / f"{name}.png", max_side=side)
    return loaded.array, f"sample: {name}"


@st.cache_data(show_spinner=False, max_entries=32)
def _synthetic(kind: str, size: int, seed: int, period: int) -> tuple[np.ndarray, str]:
    from lpips_explorer import synth

    if kind == "texture patch":
        return synth.texture_patch(seed, size=size), f"texture patch (seed {seed}, {size} px)"
    if kind == "stripes":
        return synth.stripes(size, period), f"stripes ({size} px, period {period})"
    if kind == "checkerboard":
        return synth.checkerboard(size, max(1, period // 2)), f"checkerboard ({size} px, squares {max(1, period // 2)})"
    if kind == "grating":
        return synth.grating(size / period, 30.0, size=size), f"grating ({size} px, period {period}, 30°)"
    return synth.gradient(size=size), f"gradient ({size} px)"


def set_reference(array: np.ndarray, name: str, *, notices: Sequence[str] = ()) -> None:
    """Make ``array`` (``(H, W, 3)`` float32 in ``[0, 1]``) the reference of every page, shown as ``name``."""
    st.session_state[state.REF_IMAGE] = array
    st.session_state[state.REF_NAME] = name
    st.session_state[state.REF_NOTICES] = tuple(notices)


def reference() -> tuple[np.ndarray, str]:
    """The current reference image ``(H, W, 3)`` float32 in ``[0, 1]`` and its name (raw: escape it for Markdown)."""
    init_state()
    return st.session_state[state.REF_IMAGE], st.session_state[state.REF_NAME]


@st.cache_data(show_spinner=False, max_entries=24)
def apply_chain(image: np.ndarray, steps_json: str) -> np.ndarray:
    """:func:`lpips_explorer.distortions.chain` on ``image`` (``(H, W, 3)`` in ``[0, 1]``), as float32;
    cached by content and chain (``steps_json`` from :func:`ui.text.chain_key`)."""
    steps = [(name, {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()})
             for name, params in json.loads(steps_json)]
    return chain(image, steps).astype(np.float32)


def current_pair() -> tuple[np.ndarray, str, np.ndarray, str]:
    """The pair the analysis pages study: ``(reference, its name, distorted, where it comes from)``.

    The distorted image is the Distortion lab's current chain applied to the sidebar's reference,
    or :data:`ui.choices.DEFAULT_CHAIN` when the lab has not been opened (or its chain is empty).
    Both names are raw text: escape them for Markdown.
    """
    ref, name = reference()
    steps = st.session_state.get(state.LAB_CHAIN)
    if steps:
        source = f"the Distortion lab's chain: {chain_label(steps)}"
    else:
        steps = DEFAULT_CHAIN
        source = f"the default distortion {chain_label(steps)} (set your own in the Distortion lab)"
    return ref, name, apply_chain(ref, chain_key(steps)), source
