"""Pure text helpers for the pages: escaping, numbers, labels, verdicts (no Streamlit here).

Everything user-controlled (a file name, a loader's message) reaches Markdown only through
:func:`md_escape`; everything here is testable without a Streamlit runtime.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Sequence

# The one way the app writes sizes ("256×170 px (width×height)") and signed or small numbers; defined
# with the lessons, whose diagnostics write them too (they may not import ui).
from lpips_core.cells import number
from lpips_core.metric_registry import NET_LABELS  # noqa: F401  (the backbones' names, in the sidebar's order)
from lpips_explorer.text import (SIZE_LABEL, distance_text, plotly_escape, significant, signed, size_hw,  # noqa: F401
                                 size_text)

# Every ASCII punctuation character may be backslash-escaped in CommonMark, and renders as itself.
# Streamlit's Markdown also reads `:red[...]` and emoji shortcodes (so `:` is escaped) and turns
# `:material/x:` into an icon before parsing (so `/` is escaped).
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:/&])")
# GFM turns bare URLs and e-mail addresses into links whatever their escapes: a WORD JOINER
# (U+2060, invisible, zero width) before "://", after "www" and before "@" keeps them text.
_AUTOLINK = re.compile(r"(?i)(?<=[a-z])(?=://)|(?<=\bwww)(?=\.)|(?=@)")
WORD_JOINER = "\u2060"


def md_escape(text: object, *, links: bool = False) -> str:
    """``text`` as a string whose Markdown (and HTML) syntax renders literally.

    Use it for every string not written by the app (file names, loader and weights messages) that
    reaches ``st.markdown``, ``st.caption``, ``st.error`` and friends, or an image caption:
    ``"[x](y)"`` → ``"\\[x\\]\\(y\\)"``. Bare URLs and e-mail addresses also become plain
    text (an invisible word joiner, U+2060, keeps GFM from linking them) unless ``links``: pass
    ``links=True`` only for the library's own messages, whose download links should stay clickable.
    """
    text = str(text)
    if not links:
        text = _AUTOLINK.sub(WORD_JOINER, text)
    return _MD_SPECIAL.sub(r"\\\1", text)


def md_frame(frame):
    """A copy of the ``DataFrame`` ``frame`` for ``st.table``, which reads every cell, column name and
    index label as Markdown: each text among them through :func:`md_escape` (numbers stay numbers)."""
    out = frame.copy()
    esc = lambda v: md_escape(v) if isinstance(v, str) else v  # noqa: E731
    out.columns = [esc(c) for c in out.columns]
    out.index = out.index.map(esc).rename(esc(frame.index.name))
    for col in out.columns:
        if out[col].dtype == object or str(out[col].dtype) in ("string", "str"):
            out[col] = out[col].map(esc)
    return out


def fmt(value: float, digits: int = 4) -> str:
    """A number for display with ``digits`` decimals: ``"∞"`` / ``"−∞"`` for infinities (identical images' PSNR)
    (:func:`lpips_core.cells.number`, the one number format)."""
    return number(value, digits)


def png_data_url(array: Any) -> str:
    """An image as a ``data:image/png;base64,…`` URL for ``st.image``: lossless (``st.image`` sends a
    NumPy array as a JPEG) and carried in the page's own message, so the browser never fetches it
    from the server's media store, where a later run may already have removed it (a 404).

    Args:
        array: ``(H, W, 3)`` or ``(H, W)`` float, clipped to ``[0, 1]`` and rounded to 8 bits.
    """
    import base64

    import numpy as np

    from lpips_core.images import image_to_png_bytes

    png = image_to_png_bytes(np.clip(np.asarray(array, dtype=np.float32), 0.0, 1.0))
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def chain_key(steps: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """A canonical, hashable form of a distortion chain (for caches): sorted-key JSON."""
    return json.dumps([[name, params] for name, params in steps], sort_keys=True, default=list)


def chain_label(steps: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """``"gaussian_blur(sigma=1.5) → jpeg(quality=30)"``; ``"no distortion"`` for an empty chain."""
    if not steps:
        return "no distortion"
    parts = []
    for name, params in steps:
        args = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()
                         if v is not None)
        parts.append(f"{name}({args})")
    return " → ".join(parts)


def verdict(metric: str, shifted: float, blurred: float, *, higher_is_better: bool = False) -> str:
    """Which copy ``metric`` calls closer to the reference, and by how much.

    For a distance (lower is closer: MSE, LPIPS) the factor is the ratio of the two distances;
    for a similarity (``higher_is_better``, e.g. SSIM) the two values are quoted instead.
    """
    if not (math.isfinite(shifted) and math.isfinite(blurred)):
        return f"{metric} cannot compare the copies"
    if shifted == blurred:
        return f"{metric} calls both copies equally close"
    if higher_is_better:
        closer, hi, lo = ("shifted", shifted, blurred) if shifted > blurred else ("blurred", blurred, shifted)
        return f"{metric} prefers the {closer} copy ({hi:.3f} vs {lo:.3f})"
    closer, lo, hi = ("shifted", shifted, blurred) if shifted < blurred else ("blurred", blurred, shifted)
    if lo <= 0:
        return f"{metric} calls the {closer} copy identical to the reference"
    return f"{metric} calls the {closer} copy {hi / lo:.1f}× closer"


def device_word(device: str) -> str:
    """``"GPU"`` for a CUDA device, else the device's name in capitals (``"MPS"``, ``"CPU"``)."""
    return "GPU" if str(device).startswith("cuda") else str(device).upper()


def config_summary(spec: Any, device: str, ref_name: str | None, *, escape: bool = True) -> str:
    """The configuration of a page run (the sidebar's :class:`~lpips_core.spec.MetricSpec`, the
    device, the reference): ``"LPIPS · AlexNet (lpips-alex-0.1-lin-[-1,1]), device cpu, reference
    sample: chelsea"``; Markdown-escaped (``escape``, for the page) or raw (for the log)."""
    esc = md_escape if escape else str
    parts = [esc(f"{spec.label} ({spec.name})"), f"device {esc(device)}"]
    if ref_name is not None:
        parts.append(f"reference {esc(ref_name)}")
    return ", ".join(parts)


def page_error_message(where: str, exc: BaseException, config: str) -> str:
    """The short message an error boundary shows: what failed, the exception's type (never its
    text, which may hold server paths), the configuration, and what to do."""
    return (f"**{md_escape(where)} stopped with an unexpected error** ({type(exc).__name__}). "
            f"Configuration: {config}. The details are in the server's log; changing the settings "
            "or the reference and trying again may help.")
