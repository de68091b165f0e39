"""benchmarks/dataset_budget.py: the lower bound it reports rests on ``idat`` returning a PNG
file's whole zlib stream of pixels, which these tests check on files Pillow writes."""

from __future__ import annotations

import importlib.util
import io
import sys
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(_BENCH))  # dataset_budget imports bench and machine from beside it
_spec = importlib.util.spec_from_file_location("dataset_budget", _BENCH / "dataset_budget.py")
budget = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(budget)


def _png(pixels: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def test_idat_joins_every_idat_chunk_into_the_pixels_zlib_stream():
    pixels = np.random.default_rng(0).integers(0, 256, size=(200, 300, 3), dtype=np.uint8)
    data = _png(pixels)
    assert data.count(b"IDAT") > 1  # noise does not compress: Pillow writes several chunks
    raw = zlib.decompress(budget.idat(data))
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(200, 1 + 300 * 3)
    assert set(rows[:, 0].tolist()) <= {0, 1, 2, 3, 4}  # one filter byte per row


def _unfilter(raw: bytes, h: int, w: int) -> np.ndarray:
    """The PNG specification's reconstruction of 8-bit RGB scanlines (filters 0-4), by hand."""
    stride, out, prev = 3 * w, [], [0] * (3 * w)
    for r in range(h):
        kind, line = raw[r * (stride + 1)], list(raw[r * (stride + 1) + 1:(r + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - 3] if i >= 3 else 0
            b, c = prev[i], prev[i - 3] if i >= 3 else 0
            if kind == 1:
                line[i] = (line[i] + a) % 256
            elif kind == 2:
                line[i] = (line[i] + b) % 256
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) % 256
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) % 256
        out.append(line)
        prev = line
    return np.array(out, dtype=np.uint8).reshape(h, w, 3)


def test_idat_gives_back_the_pixels_once_inflated_and_unfiltered():
    pixels = np.random.default_rng(1).integers(0, 256, size=(6, 7, 3), dtype=np.uint8)
    pixels[:, :3] = (10, 200, 7)  # flat parts too, so that Pillow's adaptive filtering varies
    raw = zlib.decompress(budget.idat(_png(pixels)))
    assert np.array_equal(_unfilter(raw, 6, 7), pixels)
