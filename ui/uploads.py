"""Folders the dataset pages work on: the built-in demo set and unpacked uploads, one per session key.

Shared by "Score a dataset" and "LPIPS space". The demo set is written once into the shared
scratch area and reused by every server. An upload (a zip, unpacked by the hostile-safe
:func:`lpips_core.datasets.archive.extract_zip`, or a set of files) lives in a folder owned by
this session (:mod:`lpips_explorer.runtime.scratch`, within a byte budget), stored in the session under a
key with the digest of the bytes it came from: the same upload reuses it, a new one replaces (and
deletes) it, and the folder is deleted when the session ends. An upload's images may hold at most
:data:`UPLOAD_MAX_PIXELS` in all, counted from their headers (:func:`over_budget`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

import streamlit as st

from lpips_core.datasets.pairs import folder_pixels
from lpips_explorer import demo_dataset, environment
from lpips_explorer.runtime.scratch import default_root, shared_folder

from .sessions import scratch_folder, scratch_release, scratch_settle

__all__ = ["UPLOAD_MAX_PIXELS", "demo_root", "over_budget", "replace_root"]


def _upload_max_pixels() -> int:
    """The pixels one upload may hold in all (its images within the per-image budget, from their
    headers), since the pages compute on the server for every visitor; more is for the CLI.
    ``$LPIPS_EXPLORER_UPLOAD_MAX_MP`` sets it in megapixels (default 100)."""
    return environment.upload_max_pixels(100)


UPLOAD_MAX_PIXELS = _upload_max_pixels()


def _demo_name() -> str:
    """The demo folder's name: a digest of the code that writes it and of the photos it cuts."""
    h = hashlib.sha256(Path(demo_dataset.__file__).read_bytes())
    for photo in sorted(demo_dataset.SAMPLES_DIR.glob("*.png")):
        h.update(f"{photo.name}:{photo.stat().st_size}".encode())
    return f"demo-{h.hexdigest()[:16]}"


def demo_root() -> str:
    """The demo set, written once (by the first server that needs it) and reused by every server."""
    name = _demo_name()
    root = default_root() / name
    if (root / ".complete").is_file():
        return str(root)
    with st.spinner("Writing the demo set…"):
        return str(shared_folder(name, demo_dataset.make_demo, stale_prefix="demo-"))


def replace_root(key: str, digest: str, kind: str, want: int,
                 make: Callable[[Path, int], None]) -> tuple[Path, int]:
    """The folder stored under ``key`` for content ``digest``, and its allowance: a new folder
    owned by this session (the replaced one deleted), filled by ``make(folder, allowance)``.

    Raises:
        lpips_explorer.runtime.scratch.ScratchFull: no room for ``want`` bytes in the scratch budget.
        Whatever ``make`` raises (the new folder is released first).
    """
    old = st.session_state.get(key)
    if old and old[0] == digest and Path(old[1]).is_dir():
        return Path(old[1]), old[2] if len(old) > 2 else want
    if old:
        scratch_release(old[1])
        del st.session_state[key]
    folder, allowance = scratch_folder(kind, want=want, at_least=min(want, 1 << 20))
    try:
        make(folder, allowance)
    except BaseException:
        scratch_release(folder)
        raise
    scratch_settle(folder)
    st.session_state[key] = (digest, str(folder), allowance)
    return folder, allowance


def unpack_zip(key: str, data: bytes) -> tuple[Path, int] | None:
    """An uploaded zip unpacked into this session's folder under ``key`` (reused while the bytes
    are the same) and its allowance, or ``None`` after showing why it was refused (a hostile or
    damaged archive, or no room left in the scratch budget)."""
    from lpips_core.datasets.archive import MAX_BYTES, ArchiveRefused, extract_zip
    from lpips_explorer.runtime.scratch import ScratchFull

    from .text import md_escape

    try:
        return replace_root(key, hashlib.sha256(data).hexdigest(), "zip", MAX_BYTES,
                            lambda folder, room: extract_zip(data, folder, max_bytes=room))
    except ArchiveRefused as exc:
        st.error(f"The zip was refused: {md_escape(str(exc))}")
    except ScratchFull as exc:
        st.error(md_escape(str(exc)))
    return None


@st.cache_data(show_spinner=False, max_entries=32)
def _pixels(folder: str, digest: str) -> int:
    """:func:`folder_pixels` of an uploaded folder (``digest``: its upload's, so a new upload counts again)."""
    return folder_pixels(folder)


def over_budget(folders, digest: str, command: str) -> str | None:
    """Why an upload is too large to compute on here, or ``None``: the images in ``folders`` hold
    more than :data:`UPLOAD_MAX_PIXELS` in all (counted from their headers). ``command``: the CLI
    that does the same on the user's machine."""
    limit = _upload_max_pixels()  # read on every call: the setting may change without a new import
    total = sum(_pixels(str(f), digest) for f in folders)
    if total <= limit:
        return None
    return (f"The chosen folders' images hold {total / 1e6:,.0f} megapixels in all, more than the "
            f"{limit / 1e6:,.0f} this page computes on per upload (it runs on a server shared with "
            f"other visitors). Choose fewer or smaller images, or run it on your machine: `{command}`.")
