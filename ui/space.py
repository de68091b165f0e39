"""LPIPS space's cached work, per server: the analysis of a folder under a spec (a few kept)."""

from __future__ import annotations

import streamlit as st

from lpips_explorer.space_view import analyse_set

#: The most neighbours the page shows (the analysis computes this many once).
MAX_K = 10


@st.cache_data(show_spinner="Embedding every image once, then all pairs…", max_entries=6)
def view(folder: str, spec_name: str, _model):
    """The page's view of ``folder`` under ``spec_name`` (the model is the sidebar's, keyed by the spec)."""
    from lpips_core.spec import parse_spec

    return analyse_set(_model, folder, parse_spec(spec_name), k=MAX_K)
