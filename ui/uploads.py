"""Folders the dataset pages work on: the built-in demo set and unpacked uploads, one per session key.

Shared by "Score a dataset" and "LPIPS space". An upload (a zip, unpacked by the hostile-safe
:func:`lpips_core.datasets.archive.extract_zip`) lives in a temporary folder stored in the
session under a key, with the digest of the bytes it came from: the same upload reuses it, a new
one replaces (and deletes) it.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Callable

import streamlit as st

from lpips_explorer.demo_dataset import make_demo

__all__ = ["demo_root", "replace_root"]


@st.cache_resource(show_spinner="Writing the demo set…")
def demo_root() -> str:
    """The demo set, written once per server into a temporary folder."""
    root = Path(tempfile.mkdtemp(prefix="lpips-demo-"))
    make_demo(root)
    return str(root)


def replace_root(key: str, digest: str, make: Callable[[], Path]) -> Path | None:
    """The folder stored under ``key`` for content ``digest``; made by ``make()`` when new."""
    old = st.session_state.get(key)
    if old and old[0] == digest:
        return Path(old[1])
    if old:
        shutil.rmtree(old[1], ignore_errors=True)
        del st.session_state[key]
    root = make()
    st.session_state[key] = (digest, str(root))
    return root
