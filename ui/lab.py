"""The Distortion lab's cached work, per server: the classic metrics and each spec's score of one pair.

The cached functions take the pair's key (:func:`pair_key`) and the images unhashed (``_ref``,
``_dist``): Streamlit hashes every hashed argument on each call, and the calls of a rerun would
hash both images again each time. The computation is :mod:`lpips_explorer.lab`.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from lpips_core.caching import content_digest
from lpips_core.spec import MetricSpec
from lpips_explorer import lab as L


def pair_key(ref: np.ndarray, chain_json: str) -> str:
    """What identifies the lab's pair: the reference's content digest and the chain (its JSON)."""
    return f"{content_digest(ref)}:{chain_json}"


@st.cache_data(show_spinner=False, max_entries=16)
def classic_metrics(pair: str, _ref: np.ndarray, _dist: np.ndarray) -> dict[str, float]:
    return L.classic_values(_ref, _dist)


@st.cache_data(show_spinner=False, max_entries=8)  # each holds five maps: 5 MB at 512 px
def scored(pair: str, spec: str, _ref: np.ndarray, _dist: np.ndarray, _model) -> L.Scored:
    """:func:`lpips_explorer.lab.score`: one forward pass of the distorted image (the reference's
    features are cached by the model); cached by the pair and the spec's name (``_model`` is its model)."""
    return L.score(_model, MetricSpec.parse(spec), _ref, _dist)
