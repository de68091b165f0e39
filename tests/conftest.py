"""Shared fixtures: the golden example images, the reference ``lpips`` package as oracle, devices."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def golden_dir() -> Path:
    """``../shared/golden`` beside the checkout (override with ``LPIPS_GOLDEN_DIR``)."""
    return Path(os.environ.get("LPIPS_GOLDEN_DIR", REPO.parent / "shared" / "golden"))


@pytest.fixture(scope="session")
def golden() -> dict[str, np.ndarray]:
    """The reference repository's three 64×64 examples as float arrays in [0, 1].

    Missing files fail the tests that use them: they are CI's test data, not optional.
    """
    from PIL import Image

    d = golden_dir()
    out = {}
    for name in ("ex_ref", "ex_p0", "ex_p1"):
        path = d / f"{name}.png"
        if not path.is_file():
            pytest.fail(f"golden image {path} is missing (set LPIPS_GOLDEN_DIR to the shared golden folder)")
        out[name] = np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) / 255.0
    return out


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


def reference_lpips(net: str, version: str, lin: bool, features_state_dict: dict, *, spatial: bool = False):
    """The reference package's model (``pnet_rand=True``: downloads nothing) given our backbone weights."""
    from lpips_core.oracle import reference_model

    return reference_model(net, version, lin, features_state_dict, spatial=spatial)


# --------------------------------------------------------------------------- Streamlit AppTest
@pytest.fixture
def app():
    """A fresh ``AppTest`` of ``app.py`` (not yet run), with a timeout fit for CPU inference."""
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(REPO / "app.py"), default_timeout=180)
