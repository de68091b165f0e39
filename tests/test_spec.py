"""lpips_core.spec: the one metric-configuration type, its classic metrics, and what it says about a model.

Parsing and naming are tested with the dataset scorer (``tests/test_datasets_score.py``); here
the parts every page, the study and the sweeps rely on: the classic metrics declared once, the
standard list, the model a spec needs, and the checks that refuse another model.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio

from lpips_core import metric_registry
from lpips_core import metrics as M
from lpips_core.spec import CLASSIC, MetricSpec, parse_spec, standard_specs
from lpips_explorer.distortions import gaussian_noise
from lpips_explorer.synth import texture_patch


def test_the_classic_metrics_are_declared_once_and_compute_the_metrics_module():
    assert list(CLASSIC) == ["mse", "psnr", "ssim"]
    assert [(c.label, c.unit, c.higher_is_better) for c in CLASSIC.values()] == [
        ("MSE", "", False), ("PSNR", "dB", True), ("SSIM", "", True)]
    x = texture_patch(0, dtype=np.float64)
    y = gaussian_noise(x, 0.05, seed=1)
    assert CLASSIC["mse"](x, y) == M.mse(x, y) == pytest.approx(float(np.mean((x - y) ** 2)), abs=1e-15)
    assert MetricSpec("psnr").classic(x, y) == pytest.approx(peak_signal_noise_ratio(x, y, data_range=1.0), abs=1e-9)
    assert [MetricSpec(n).higher_is_better for n in CLASSIC] == [False, True, True]
    assert not any(s.higher_is_better for s in standard_specs() if s.learned)  # every learned metric is a distance


def test_standard_specs_follow_the_registry():
    specs = standard_specs()
    names = [s.name for s in specs]
    assert names[:3] == ["mse", "psnr", "ssim"] and len(set(names)) == len(names)
    want = 3 + sum(len(i.nets) * (2 if i.has_baseline else 1) for i in metric_registry.METRICS.values())
    assert len(specs) == want
    assert [s.name for s in standard_specs(baselines=False) if s.learned] == [
        MetricSpec(m, net=n).name for m, info in metric_registry.METRICS.items() for n in info.nets]
    assert "lpips-vgg-0.1-baseline-[-1,1]" in names and "dists-vgg-[0,1]" in names


def test_labels_and_what_a_spec_says_about_its_metric():
    lp = MetricSpec("lpips", net="vgg", version="0.0", lin=False, size=64)
    st, di = MetricSpec("stlpips"), MetricSpec("dists")
    assert lp.label == "LPIPS · VGG16 (v0.0, baseline, 64 px)" and lp.metric_label == "LPIPS"
    assert (st.label, st.metric_label, di.metric_label, MetricSpec("psnr").metric_label) == (
        "ST-LPIPS · AlexNet", "ST-LPIPS", "DISTS", "PSNR")
    assert (lp.has_maps, st.has_maps, di.has_maps, MetricSpec("mse").has_maps) == (True, True, False, False)
    assert di.components == ("texture", "structure") and lp.components == () and MetricSpec("ssim").components == ()
    # the model a spec needs leaves out the input (convention, colour, size); the row leaves out all but the net
    assert lp.model_spec == MetricSpec("lpips", net="vgg", version="0.0", lin=False)
    assert lp.row_spec == MetricSpec("lpips", net="vgg") and lp.row_spec.label == "LPIPS · VGG16"
    assert MetricSpec("lpips", convention="[0,1]", grayscale=True).model_spec.name == "lpips-alex-0.1-lin-[-1,1]"
    assert MetricSpec("mse").model_spec == MetricSpec("mse") == MetricSpec("mse").row_spec
    assert parse_spec(lp.name) == lp  # a name is a spec


@pytest.fixture(scope="module")
def alex():
    return MetricSpec("lpips").build()


def test_a_model_knows_its_spec_and_a_spec_refuses_another_model(alex):
    assert MetricSpec.of_model(alex) == MetricSpec("lpips", net="alex", version="0.1", lin=True)
    MetricSpec("lpips", size=64, convention="[0,1]").check_model(alex)  # the input does not change the model
    for other, got in ((MetricSpec("lpips", net="vgg"), "lpips-alex-0.1-lin-[-1,1]"),
                       (MetricSpec("lpips", lin=False), "lpips-alex-0.1-lin-[-1,1]"),
                       (MetricSpec("lpips", version="0.0"), "lpips-alex-0.1-lin-[-1,1]"),
                       (MetricSpec("stlpips"), "lpips-alex-0.1-lin-[-1,1]")):
        with pytest.raises(TypeError, match=re.escape(f"{other.label} needs its own model ({other.model_spec.name}), "
                                                      f"got {got}")):
            other.check_model(alex)
    with pytest.raises(TypeError, match="got object"):
        MetricSpec("lpips").check_model(object())
    with pytest.raises(TypeError, match="not a model of a registered metric"):
        MetricSpec.of_model(object())
    baseline = MetricSpec("lpips", lin=False).build()
    assert MetricSpec.of_model(baseline).name == "lpips-alex-0.1-baseline-[-1,1]"


def test_for_model_is_the_one_check_of_a_spec_against_a_model(alex):
    """``MetricSpec.for_model``: the model's own spec by default, else the spec given (a spec or
    its name, with its input options), checked; a classic spec has no model."""
    assert MetricSpec.for_model(alex) == MetricSpec.of_model(alex)
    given = MetricSpec.for_model(alex, "lpips-alex-[0,1]@64")
    assert given == MetricSpec("lpips", convention="[0,1]", size=64)
    assert MetricSpec.for_model(alex, given) is given
    with pytest.raises(TypeError, match=re.escape("LPIPS · VGG16 needs its own model (lpips-vgg-0.1-lin-[-1,1]), "
                                                  "got lpips-alex-0.1-lin-[-1,1]")):
        MetricSpec.for_model(alex, "lpips-vgg")
    with pytest.raises(TypeError, match="got object"):
        MetricSpec.for_model(object(), "lpips")
    with pytest.raises(ValueError, match="SSIM is computed on the images directly; it has no model"):
        MetricSpec.for_model(alex, "ssim")
    with pytest.raises(ValueError, match="unknown metric"):
        MetricSpec.for_model(alex, "lpipz")
