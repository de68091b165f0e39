"""``lpips_core.distance`` and the top-level names: two files or arrays in, one float out, the
same number as ``python -m lpips_core compare`` (both run :func:`lpips_core.api.compare_images`)."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import torch

import lpips_core
from conftest import golden_dir
from lpips_core import LPIPS, MetricSpec, distance
from lpips_core.__main__ import main as cli_main
from lpips_core.conventions import to_input


def _cli_json(*args: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["compare", *args, "--json"]) == 0
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def files():
    d = golden_dir()
    return str(d / "ex_ref.png"), str(d / "ex_p0.png"), str(d / "ex_p1.png")


def test_distance_of_two_files_is_the_published_value_and_a_float(files):
    """Provenance: the reference repository's test_network.py prints (0.722, 0.138) for these files
    with AlexNet v0.1 lin; the six places are the reference lpips 0.1.4 package's (tests/data/README.md)."""
    ref, p0, p1 = files
    d0, d1 = distance(ref, p0), distance(ref, p1)
    assert type(d0) is float and type(d1) is float
    assert (round(d0, 6), round(d1, 6)) == (0.721881, 0.137566)


@pytest.mark.parametrize("metric, cli", [
    ("lpips", []),
    ("lpips-vgg-0.0-baseline", ["--net", "vgg", "--version", "0.0", "--baseline"]),
    ("lpips-alex-[0,1]@48", ["--convention", "[0,1]", "--size", "48"]),
    ("dists", ["--metric", "dists"]),
])
def test_distance_equals_the_cli(files, metric, cli):
    ref, p0, _ = files
    assert distance(ref, p0, metric) == _cli_json(ref, p0, *cli)["distance"]


def test_keywords_fill_what_the_name_leaves_out_and_arrays_equal_files(files, golden):
    ref, p0, _ = files
    by_name = distance(ref, p0, "lpips-vgg-0.0")
    assert distance(ref, p0, "lpips", net="vgg", version="0.0") == by_name
    assert distance(ref, p0, MetricSpec("lpips", net="vgg", version="0.0")) == by_name
    assert distance(golden["ex_ref"], golden["ex_p0"], "lpips-vgg-0.0") == by_name
    u8 = (np.round(golden["ex_ref"] * 255)).astype(np.uint8), (np.round(golden["ex_p0"] * 255)).astype(np.uint8)
    assert distance(*u8, "lpips-vgg-0.0") == by_name
    model = LPIPS("vgg", "0.0", device="cpu")
    assert distance(ref, p0, "lpips-vgg-0.0", model=model) == by_name
    assert distance(ref, p0, "mse") == pytest.approx(float(np.mean((golden["ex_ref"] - golden["ex_p0"]) ** 2)))


def test_distance_refuses_what_it_cannot_score(files, golden):
    ref, p0, _ = files
    with pytest.raises(ValueError, match="unknown metric"):
        distance(ref, p0, "lpipz")
    with pytest.raises(ValueError, match="differ in size"):
        distance(golden["ex_ref"], golden["ex_p0"][:32])
    with pytest.raises(ValueError, match=r"lie in \[0, 1\]"):
        distance(golden["ex_ref"] * 255, golden["ex_p0"] * 255)
    with pytest.raises(TypeError, match="path or an"):
        distance(3, p0)


def test_a_result_gives_floats(golden):
    model = LPIPS("alex", device="cpu")
    x, y = to_input(golden["ex_ref"]), to_input(golden["ex_p0"])
    res = model.compare(x, y)
    assert isinstance(res.total, torch.Tensor) and float(res) == float(res.total[0]) == res.tolist()[0]
    two = model.compare(torch.cat([x, x]), torch.cat([y, x]))
    assert two.tolist() == [float(res), 0.0]
    with pytest.raises(ValueError, match="one pair"):
        float(two)


def test_the_top_level_names():
    for name in ("LPIPS", "STLPIPS", "DISTS", "ELPIPS", "MetricSpec", "build", "distance", "load_image",
                 "to_input", "prepare_input", "WeightsUnavailable"):
        assert name in lpips_core.__all__ and getattr(lpips_core, name) is not None
