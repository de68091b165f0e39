"""Debug a score's cached work: the uploaded files as loaded, the finished diagnoses, their images.

Every cache here is server-wide (``st.cache_data`` / ``st.cache_resource``): a file's load by its
bytes, name and size limits; a finished diagnosis (or the reason it could not run) by both files'
content and every setting that moves the score, so a slider or a download, which reruns the page,
does not diagnose the pair again; and each diagnosis's two images as PNG data URLs, encoded once
and dropped with the diagnosis (a weak mapping).
"""

from __future__ import annotations

import io
import weakref

import streamlit as st

from lpips_core.caching import LRU, content_digest
from lpips_core.images import ImageLoadError, LoadedImage, load_image
from lpips_explorer.diagnostics import Diagnosis, diagnose_files

from .text import png_data_url

__all__ = ["FINISHED_KEPT", "load", "pair_images", "run"]


@st.cache_data(show_spinner=False, max_entries=16)
def load(data: bytes, name: str, max_side: int, min_side: int) -> LoadedImage | str:
    """The file through the hardened loader; the loader's message (a ``str``) when it refuses it."""
    src = io.BytesIO(data)
    src.name = name
    try:
        return load_image(src, max_side=max_side, min_side=min_side)
    except ImageLoadError as exc:
        return str(exc)


#: Finished diagnoses kept for the whole server (a slider or a download reruns the page).
FINISHED_KEPT = 8


@st.cache_resource(show_spinner=False)
def _finished() -> LRU:
    """The server's last :data:`FINISHED_KEPT` finished diagnoses (or refusals), by content."""
    return LRU(FINISHED_KEPT)


@st.cache_resource(show_spinner=False)
def _shown() -> weakref.WeakKeyDictionary:
    """Each finished diagnosis's two images as PNG data URLs (encoded once, not on every rerun)."""
    return weakref.WeakKeyDictionary()


def pair_images(diag: Diagnosis) -> tuple[str, str]:
    """The reference and the test as compared, as PNG data URLs (:func:`ui.png_data_url`): exact
    pixels, and no media file for a replaced upload's rerun to leave the browser asking for (a 404
    for the old image in the browser's console)."""
    shown = _shown()
    if diag not in shown:
        shown[diag] = (png_data_url(diag.reference), png_data_url(diag.test))
    return shown[diag]


def run(ref_data: bytes, ref_name: str, test_data: bytes, test_name: str, resolution: str, working_side: int,
        method: str, spec: str, model, on_partial) -> Diagnosis | str:
    """:func:`diagnose_files` on the two files as uploaded (``on_partial`` sees the score first, then
    each check) with ``spec``'s model; the reason (a ``str``) when it cannot run. Finished results
    are reused by content."""
    key = (content_digest(ref_data), content_digest(test_data), ref_name, test_name, resolution, working_side,
           method, spec)

    def compute() -> Diagnosis | str:
        try:
            return diagnose_files(model, ref_data, test_data, reference_name=ref_name, test_name=test_name,
                                  resolution=resolution, working_side=working_side, method=method,
                                  on_partial=on_partial)
        except ImageLoadError as exc:
            return str(exc)
        except ValueError as exc:  # e.g. an image the backbone cannot take even after upscaling
            return f"The pair could not be scored: {exc}"

    return _finished().get_or_compute(key, compute)
