"""Inside a layer's cached work, per server: every layer of one pair (a few kept)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from lpips_explorer.diagnostics import layer_breakdown


@st.cache_data(show_spinner=False, max_entries=2)
def breakdown(ref: np.ndarray, dist: np.ndarray, spec: str, _model):
    """Every layer of one pair; one forward pass of the distorted image (the reference's is cached)."""
    return layer_breakdown(_model, ref, dist)
