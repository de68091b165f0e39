"""Explain a reported number: the configuration that produced a dataset's mean ranks first."""

from __future__ import annotations

import numpy as np
import pytest

from datasets_shared import make_pairs
from lpips_core.datasets import Scorer, match_folders, score_pairs
from lpips_core.datasets.explain import explain, name_hints


@pytest.fixture(scope="module")
def folder_pairs(tmp_path_factory):
    # 40 x 40 px: native differs from the 64 px candidate size
    root = tmp_path_factory.mktemp("explain")
    a, b = make_pairs(root, n=4, odd_size=0, seed=5)
    from PIL import Image

    for p in list(a.rglob("*.png")) + list(b.rglob("*.*")):
        Image.open(p).convert("RGB").resize((40, 40), Image.BILINEAR).save(p)
    return match_folders(a, b)


@pytest.mark.slow  # the whole 96-configuration grid, half of it on VGG16 (full tier)
def test_vgg_at_64_with_0_1_inputs_ranks_first(folder_pairs):
    truth = "lpips-vgg-0.1-lin-[0,1]@64"
    sc = Scorer([truth], device="cpu")
    mean = score_pairs(folder_pairs, scorer=sc, workers=0).summary["metrics"][truth]["mean"]
    models = {("vgg", "0.1"): sc.model(sc.specs[0])}
    res = explain(folder_pairs, mean, name="LPIPS (VGG)", nets=("alex", "vgg"), sizes=(None, 64), workers=0,
                  models=models)
    best = res.candidates[0]
    assert best.spec.name == truth
    assert best.distance <= 1e-6 and best.holds_reported and best.matches_name
    assert best.n == 4 and best.mean == pytest.approx(mean, abs=1e-6)
    # every configuration: 2 nets x 2 versions x lin/baseline x 3 ranges x colour/gray x 2 sizes
    assert len(res.candidates) == 2 * 2 * 2 * 3 * 2 * 2
    assert [c.distance for c in res.candidates] == sorted(c.distance for c in res.candidates)
    # the spread is the column's: std (ddof=1) and the t interval
    vals = np.array([r[truth] for r in score_pairs(folder_pairs, scorer=sc, workers=0).rows])
    assert best.std == pytest.approx(vals.std(ddof=1), rel=1e-5)
    assert res.to_json(top=3)["candidates"][0]["config"] == truth


def test_name_hints():
    assert name_hints("LPIPS (VGG)") == {"nets": ["vgg"]}
    assert name_hints("LPIPS-Alex v0.0 baseline") == {"nets": ["alex"], "version": "0.0", "lin": False}
    assert name_hints(None) == {}


def test_explain_refuses_bad_values(folder_pairs):
    with pytest.raises(ValueError, match="finite"):
        explain(folder_pairs, float("nan"))
    with pytest.raises(ValueError, match="conventions"):
        explain(folder_pairs, 0.1, conventions=("[0,2]",))
    with pytest.raises(ValueError, match="at least one pair"):
        explain([], 0.1, nets=("alex",))
