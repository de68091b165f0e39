"""The metric table, input preparation, factory and weight availability of ``metric_registry``."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from lpips_core.metric_registry import (
    METRICS,
    availability,
    convention_note,
    correct_convention,
    prepare_input,
    resolve_net,
)

REPO = Path(__file__).resolve().parents[1]


def test_table():
    assert tuple(METRICS) == ("lpips", "stlpips", "dists")
    assert {k: m.input_range for k, m in METRICS.items()} == {"lpips": "[-1,1]", "stlpips": "[-1,1]", "dists": "[0,1]"}
    assert METRICS["stlpips"].nets == ("alex", "vgg") and METRICS["dists"].nets == ("vgg",)
    assert METRICS["stlpips"].has_maps and not METRICS["dists"].has_maps
    assert METRICS["dists"].components == ("texture", "structure") and METRICS["lpips"].components == ()
    for m in METRICS.values():
        assert m.default_net in m.nets


def test_prepare_input_applies_each_metric_convention():
    img = np.random.default_rng(0).random((20, 30, 3)).astype(np.float32)
    x01 = torch.from_numpy(img).permute(2, 0, 1)[None]
    torch.testing.assert_close(prepare_input("lpips", img), x01 * 2 - 1)
    torch.testing.assert_close(prepare_input("stlpips", img), x01 * 2 - 1)
    torch.testing.assert_close(prepare_input("dists", img), x01)
    torch.testing.assert_close(prepare_input("dists", img, convention="[-1,1]"), x01 * 2 - 1)
    torch.testing.assert_close(prepare_input("stlpips", x01, convention="[0,255]"), x01 * 255)
    assert prepare_input("dists", img, size=16).shape == (1, 3, 16, 16)


def test_conventions_and_notes():
    assert correct_convention("dists") == "[0,1]" and correct_convention("stlpips") == "[-1,1]"
    assert convention_note("dists", "correct").startswith("DISTS: Correct")
    assert "Wrong" in convention_note("dists", "[-1,1]")
    assert "normalize=True" in convention_note("stlpips", "[0,1]")


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: prepare_input("ssim", np.zeros((8, 8, 3), np.float32)), "metric must be one of"),
        (lambda: prepare_input("dists", np.zeros((8, 8, 3), np.float32), convention="[0,2]"), "convention must be"),
        (lambda: availability("stlpips", "squeeze"), r"has nets \('alex', 'vgg'\)"),
        (lambda: availability("dists", "alex"), "has nets"),
        (lambda: convention_note("lpips", "raw"), "convention must be"),
        (lambda: resolve_net("dists", "alex"), r"DISTS has no 'alex' backbone; it has nets \('vgg',\)"),
        (lambda: resolve_net("lpips-ish"), "metric must be one of"),
    ],
)
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_resolve_net_names_the_default_or_checks_the_one_given():
    assert [resolve_net(m) for m in METRICS] == [METRICS[m].default_net for m in METRICS] == ["alex", "alex", "vgg"]
    assert resolve_net("stlpips", "vgg") == "vgg" and resolve_net("lpips", "squeeze") == "squeeze"


def test_availability_here():
    ok, msg = availability("stlpips", "vgg")
    assert ok and msg == "stlpips-pytorch (vgg_shift_tolerant.pth)"  # file names only, no server paths
    ok, msg = availability("dists")
    assert ok and "VGG16: " in msg and msg.endswith("DISTS-pytorch (weights.pt)") and "site-packages" not in msg
    assert availability("lpips", "alex")[0]


def test_availability_without_the_wheels_names_the_fix(monkeypatch):
    real = importlib.metadata.files

    def files(name):
        if name in ("stlpips-pytorch", "DISTS-pytorch"):
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "files", files)
    ok, msg = availability("stlpips", "alex")
    assert not ok and "pip install --no-deps stlpips-pytorch==0.0.2" in msg
    ok, msg = availability("dists")
    assert not ok and "pip install --no-deps DISTS-pytorch==0.1" in msg


@pytest.mark.slow  # a fresh interpreter building ST-LPIPS (both nets) and DISTS (full tier)
def test_build_uses_no_reference_package():
    """Both new metrics load their weights without importing the packages that ship them (nor
    IPython, nor Streamlit), and give 0 for identical images and > 0 otherwise."""
    code = textwrap.dedent(
        """
        import json, sys, torch
        from lpips_core.metric_registry import build, prepare_input
        img = torch.rand(1, 3, 48, 48, generator=torch.Generator().manual_seed(0))
        out = {}
        for metric, net in [("stlpips", "alex"), ("stlpips", "vgg"), ("dists", None)]:
            model = build(metric, net, device="cpu")
            x, y = prepare_input(metric, img), prepare_input(metric, img.flip(-1))
            out[f"{metric}-{net}"] = [float(model(x, x)), float(model(x, y)), type(model).__name__, model.input_range]
        out["imported"] = sorted(m for m in ("stlpips_pytorch", "DISTS_pytorch", "IPython", "torchsummary", "streamlit")
                                 if m in sys.modules)
        print(json.dumps(out))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out.pop("imported") == []
    assert out["stlpips-alex"][2:] == ["STLPIPS", "[-1,1]"] and out["dists-None"][2:] == ["DISTS", "[0,1]"]
    for same, different, *_ in out.values():
        assert abs(same) < 1e-6 and different > 1e-3
