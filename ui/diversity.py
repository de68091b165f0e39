"""Diversity for scale: the reference sets' diversities beside a set's own (the "LPIPS space" page).

:func:`reference_points` measures the sets of :data:`lpips_explorer.space_view.REFERENCE_SETS`
(one image with faint noise; independent noise images) at a set's working size under the page's
configuration, once per server for each configuration and size (``st.cache_data``, a few
seconds on a CPU the first time).
"""

from __future__ import annotations

import streamlit as st

from lpips_explorer.space_view import reference_diversity

__all__ = ["reference_points"]


@st.cache_data(show_spinner="Measuring two sets for scale…", max_entries=16)
def reference_points(spec_name: str, height: int, width: int, _model) -> dict[str, float]:
    """:func:`~lpips_explorer.space_view.reference_diversity` of the reference sets at
    ``height`` × ``width`` px under ``spec_name`` (``_model`` is its model, keyed by the name)."""
    from lpips_core.spec import parse_spec

    return reference_diversity(_model, parse_spec(spec_name), (height, width))
