"""``python -m lpips_core compare``: JSON equal to the API, readable table, one-line errors.

Each subprocess test pays about 3 s of interpreter and torch start-up (plus its model). The fast
tier runs one end to end (:func:`test_json_equals_api`, the default configuration against the API
and the published 0.722) and the error corpus in-process through ``main``; the other subprocess
tests are marked ``slow`` and run with ``pytest --full``. (``test_hostile.py`` runs a one-line
error as a subprocess in both tiers.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import REPO, golden_dir
from lpips_core import LPIPS
from lpips_core.conventions import to_input


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "lpips_core", *args], capture_output=True, text=True, cwd=REPO, env=full_env, timeout=300
    )


@pytest.fixture(scope="module")
def files():
    d = golden_dir()
    return str(d / "ex_ref.png"), str(d / "ex_p0.png")


def test_json_equals_api(files, golden):
    proc = run_cli("compare", *files, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) >= {"lpips", "per_layer", "layers", "net", "version", "lin", "convention", "size", "weights"}
    model = LPIPS("alex")
    res = model.compare(to_input(golden["ex_ref"]), to_input(golden["ex_p0"]))
    assert out["lpips"] == pytest.approx(float(res.total[0]), abs=1e-6)
    assert out["lpips"] == pytest.approx(0.721881, abs=1e-6)
    np.testing.assert_allclose(out["per_layer"], res.per_layer[0], atol=1e-6)
    assert out["layers"] == ["relu1", "relu2", "relu3", "relu4", "relu5"]
    assert (out["net"], out["version"], out["lin"], out["convention"], out["size"]) == ("alex", "0.1", True, "[-1,1]", [64, 64])
    assert out["weights"] == model.weights


@pytest.mark.slow  # a subprocess (full tier)
def test_json_options_equal_api(files, golden):
    proc = run_cli("compare", *files, "--json", "--net", "vgg", "--version", "0.0", "--baseline",
                   "--convention", "[0,255]", "--size", "96", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    model = LPIPS("vgg", "0.0", lin=False, device="cpu")
    x = to_input(golden["ex_ref"], convention="[0,255]", size=96)
    y = to_input(golden["ex_p0"], convention="[0,255]", size=96)
    # model(x, y) refuses values outside [-1, 1]; compare() takes raw [0, 255] values, as the CLI's convention does
    assert out["lpips"] == pytest.approx(float(model.compare(x, y).total[0]), rel=1e-6)
    assert (out["net"], out["version"], out["lin"], out["convention"], out["size"]) == ("vgg", "0.0", False, "[0,255]", [96, 96])


@pytest.mark.slow  # a subprocess (full tier)
def test_readable_table(files):
    proc = run_cli("compare", *files)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("LPIPS 0.721881")
    assert "relu5" in proc.stdout and "weights:" in proc.stdout


def _assert_one_line_error(proc: subprocess.CompletedProcess, pattern: str) -> None:
    assert proc.returncode != 0
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert pattern in lines[0], lines[0]


@pytest.mark.slow  # a subprocess (full tier)
def test_missing_file(files):
    _assert_one_line_error(run_cli("compare", files[0], "no/such/file.png"), "No such file")


@pytest.mark.slow  # a subprocess (full tier)
def test_unreadable_image(files, tmp_path):
    bad = tmp_path / "notes.png"
    bad.write_text("hello, not an image")
    _assert_one_line_error(run_cli("compare", files[0], str(bad)), "not an image format")


@pytest.mark.slow  # a subprocess (full tier)
def test_size_mismatch(files):
    _assert_one_line_error(run_cli("compare", files[0], str(REPO / "sample_images" / "chelsea.png")), "differ in size")


@pytest.mark.slow  # a subprocess (full tier)
def test_size_mismatch_resolved_by_size(files):
    proc = run_cli("compare", files[0], str(REPO / "sample_images" / "chelsea.png"), "--size", "64", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["size"] == [64, 64]


@pytest.mark.slow  # a subprocess (full tier)
def test_missing_weights(files, tmp_path):
    env = {"TORCH_HOME": str(tmp_path), "LPIPS_EXPLORER_OFFLINE": "1"}
    _assert_one_line_error(run_cli("compare", *files, "--net", "squeeze", env=env), "squeezenet1_1-b8a52dc0.pth")


@pytest.mark.slow  # a subprocess (full tier)
def test_too_small_for_backbone(files):
    _assert_one_line_error(run_cli("compare", *files, "--size", "16"), "too small")


def test_bad_image_corpus_through_cli(tmp_path, capfd):
    """Every error case of the generated bad-image corpus (tests/image_corpus.py), passed to the
    CLI's entry point: exit status 2, exactly one line on stderr naming the problem, no traceback."""
    import re

    from image_corpus import corpus

    from lpips_core.cli import main

    good = str(golden_dir() / "ex_ref.png")
    cases = [c for c in corpus() if c.expect == "error" and not c.kwargs]
    assert len(cases) >= 10
    for case in cases:
        path = tmp_path / case.filename
        path.write_bytes(case.data)
        code = main(["compare", good, str(path)])
        out, err = capfd.readouterr()
        assert code == 2, case.name
        assert out == "" and "Traceback" not in err, case.name
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (case.name, err)
        assert re.search(case.match, lines[0]), (case.name, lines[0])


@pytest.mark.slow  # a subprocess per metric (full tier)
@pytest.mark.parametrize("metric", ["lpips", "stlpips", "dists"])
def test_metric_option_json_equals_api(files, golden, metric):
    from lpips_core import metric_registry as registry

    proc = run_cli("compare", *files, "--metric", metric, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["metric"] == metric
    model = registry.build(metric)
    x = registry.prepare_input(metric, golden["ex_ref"])
    y = registry.prepare_input(metric, golden["ex_p0"])
    assert out["distance"] == pytest.approx(float(model(x, y)[0]), abs=1e-6)
    assert out["convention"] == registry.correct_convention(metric)
    assert out["weights"] == model.weights
    assert ("lpips" in out) == (metric == "lpips")
    np.testing.assert_allclose(sum(out["per_layer"]), out["distance"], rtol=1e-5)


@pytest.mark.slow  # a subprocess (full tier)
def test_metric_option_errors(files):
    _assert_one_line_error(run_cli("compare", *files, "--metric", "dists", "--net", "alex"), "DISTS has no 'alex'")
    _assert_one_line_error(run_cli("compare", *files, "--metric", "stlpips", "--baseline"), "lpips only")


@pytest.mark.parametrize("text, value", [("64", 64), ("1", 1), ("2048", 2048), ("32x48", (32, 48)), ("2048X1", (2048, 1)),
                                         (" 96 ", 96)])
def test_size_parser_accepts_sides_up_to_the_cap(text, value):
    from lpips_core.cli.options import MAX_SIZE, parse_size
    from lpips_core.images import DEFAULT_MAX_SIDE

    assert MAX_SIZE == DEFAULT_MAX_SIDE == 2048
    assert parse_size(text) == value


def test_device_parser_accepts_what_exists():
    from lpips_core.cli.options import device

    assert device("cpu") == "cpu" and device("auto") == "auto"
    if torch.cuda.is_available():
        assert device("cuda:0") == "cuda:0"


@pytest.mark.slow  # a subprocess (full tier)
def test_help_still_exits_zero():
    proc = run_cli("compare", "--help")
    assert proc.returncode == 0 and "sides from 1 to 2048 px" in " ".join(proc.stdout.split())
