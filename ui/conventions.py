"""Conventions' cached work: the grid's pieces and the uploaded test image.

Every cache here is server-wide (``st.cache_data``), keyed by content: a piece of the LPIPS grid
(one backbone at one size) and a successor metric's row at one size by both images' pixels, the
backbone or spec name and the size (the models are passed unhashed); the uploaded test image by
its bytes, name and the reference's size. The grid is scored one piece at a time so the page can
advance its progress bar between pieces, and a rerun (a widget, another session on the same
pair) reads each piece here instead of scoring it again.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from lpips_core.conventions import resize, to_tensor
from lpips_core.images import load_image
from lpips_core.sweeps import conventions_grid, metric_conventions_grid

__all__ = ["grid_piece", "successor_piece", "uploaded_test"]


@st.cache_data(show_spinner=False, max_entries=64)
def grid_piece(ref: np.ndarray, dist: np.ndarray, net: str, size: int | None, _models: dict) -> list:
    """One backbone at one size: every variant in one batch per version (cached per piece, so the
    page can advance its progress bar between pieces); ``_models``: spec → the app's cached model."""
    return conventions_grid(ref, dist, get_model=_models.get, nets=(net,), sizes=(size,))


@st.cache_data(show_spinner=False, max_entries=32)
def successor_piece(ref: np.ndarray, dist: np.ndarray, spec: str, size: int | None, _model) -> list:
    """One extra metric (``spec``, a name; ``_model`` its model) at one size under every range
    convention, in one batch (cached by both images' content, the spec and the size)."""
    return metric_conventions_grid(_model, ref, dist, sizes=(size,))


@st.cache_data(show_spinner=False, max_entries=8)
def uploaded_test(data: bytes, name: str, shape: tuple[int, int]) -> tuple[np.ndarray, tuple[int, int]]:
    """The uploaded test image as ``(H, W, 3)`` float32 in ``[0, 1]`` at ``shape`` (bilinear, antialiased,
    when its own size differs), and its own ``(H, W)``; raises ``ValueError`` for an unreadable file."""
    arr = load_image(data).array
    own = arr.shape[:2]
    if own != tuple(shape):
        arr = resize(to_tensor(arr), tuple(shape))[0].permute(1, 2, 0).numpy().astype(np.float32)
    return np.ascontiguousarray(arr), own
