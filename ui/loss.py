"""LPIPS as a loss's cached work, per server: the sample photos at the experiments' sizes."""

from __future__ import annotations

import numpy as np
import streamlit as st

from lpips_core.images import load_image
from ui.choices import SAMPLES_DIR


@st.cache_data(show_spinner=False, max_entries=8)
def sample(name: str, side: int) -> np.ndarray:
    return load_image(SAMPLES_DIR / f"{name}.png", max_side=side).array
