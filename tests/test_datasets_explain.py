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
    models = {sc.specs[0]: sc.model(sc.specs[0])}
    res = explain(folder_pairs, mean, name="LPIPS (VGG)", use_name=False, nets=("alex", "vgg"), sizes=(None, 64),
                  workers=0, models=models)
    best = res.candidates[0]
    assert best.spec.name == truth
    assert best.distance <= 1e-6 and best.holds_reported and best.matches_name
    assert best.n == 4 and best.mean == pytest.approx(mean, abs=1e-6)
    # every configuration: 2 nets x 2 versions x lin/baseline x 3 ranges x colour/gray x 2 sizes, the
    # ones equal on this data in one row
    assert sum(len(c.same) for c in res.candidates) == 2 * 2 * 2 * 3 * 2 * 2
    assert [c.distance for c in res.candidates] == sorted(c.distance for c in res.candidates)
    # the spread is the column's: std (ddof=1) and the t interval
    vals = np.array([r[truth] for r in score_pairs(folder_pairs, scorer=sc, workers=0).rows])
    assert best.std == pytest.approx(vals.std(ddof=1), rel=1e-5)
    assert res.to_json(top=3)["candidates"][0]["config"] == truth


def test_the_name_narrows_the_search_and_a_vgg_made_number_ranks_a_vgg_configuration_first(folder_pairs):
    """A number made with VGG16 (v0.1, lin, the correct range, native size) and reported as
    "LPIPS (VGG)": only VGG16 is searched, the truth ranks first, its CI holds the value, and the
    rows are distinct configurations (none with the same values as another)."""
    truth = "lpips-vgg-0.1-lin-[-1,1]"
    mean = score_pairs(folder_pairs, [truth], workers=0).summary["metrics"][truth]["mean"]
    res = explain(folder_pairs, mean, name="LPIPS (VGG)", sizes=(None, 40, 64), workers=0)
    assert res.searched["nets"] == ["vgg"] and res.searched["narrowed_by_name"]
    assert {c.spec.net for c in res.candidates} == {"vgg"}
    best = res.candidates[0]
    assert best.spec.name == truth and best.holds_reported and best.matches_name
    # @40 equals native on these 40 px images: one row, listing both
    assert [s.name for s in best.same] == [truth, "lpips-vgg-0.1-lin-[-1,1]@40"]
    # no two rows are configurations with equal values
    names = [s.name for c in res.candidates for s in c.same]
    assert len(names) == len(set(names)) == 2 * 2 * 3 * 2 * 3
    for i, c in enumerate(res.candidates):
        for d in res.candidates[i + 1:]:
            assert c.mean != d.mean or c.std != d.std
    out = res.to_json()
    assert out["verdict"] in ("one", "several") and out["verdict"] == res.verdict
    assert out["holding"] == sum(c.holds_reported for c in res.candidates)
    assert out["candidates"][0]["same"] == [truth, "lpips-vgg-0.1-lin-[-1,1]@40"]
    assert {type(c["size"]) for c in out["candidates"]} == {str}


def test_the_verdict_counts_the_intervals_that_hold_the_value(folder_pairs):
    res = explain(folder_pairs, 1e6, name="LPIPS-Alex v0.1", conventions=("[-1,1]",), grayscale=(False,),
                  sizes=(None,), workers=0)
    assert res.verdict == "none" and "does not reproduce" in res.sentence
    assert res.searched["nets"] == ["alex"] and res.searched["versions"] == ["0.1"]
    assert len(res.candidates) == 2  # lin and baseline
    lin = next(c for c in res.candidates if c.spec.lin)
    one = explain(folder_pairs, lin.mean, name="LPIPS-Alex v0.1 lin", conventions=("[-1,1]",), grayscale=(False,),
                  sizes=(None,), workers=0)
    assert one.verdict == "one" and one.sentence.startswith("One configuration") and one.candidates[0].spec == lin.spec


def test_name_hints():
    assert name_hints("LPIPS (VGG)") == {"nets": ["vgg"]}
    assert name_hints("LPIPS-Alex v0.0 baseline") == {"nets": ["alex"], "version": "0.0", "lin": False}
    assert name_hints("LPIPS (AlexNet, v0.1)") == {"nets": ["alex"], "version": "0.1"}
    assert name_hints("LPIPS-VGG16 uncalibrated") == {"nets": ["vgg"], "lin": False}
    assert name_hints(None) == {}
    from lpips_core.datasets.explain import describe_hints, parse_name

    said = parse_name("LPIPS (VGG) v0.0")
    assert said["words"] == {"vgg": "VGG", "v0.0": "v0.0"}
    assert describe_hints(said) == "backbone VGG16 (from 'VGG'), version 0.0 (from 'v0.0')"


def test_explain_refuses_bad_values(folder_pairs):
    with pytest.raises(ValueError, match="finite"):
        explain(folder_pairs, float("nan"))
    with pytest.raises(ValueError, match="conventions"):
        explain(folder_pairs, 0.1, conventions=("[0,2]",))
    with pytest.raises(ValueError, match="at least one pair"):
        explain([], 0.1, nets=("alex",))
