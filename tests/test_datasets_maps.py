"""The worst pairs of a dataset and their spatial maps (:mod:`lpips_core.datasets.maps`).

Oracle: the reference ``lpips`` package with ``spatial=True`` (:func:`lpips_core.testing.reference_lpips`,
on our weights) on the same decoded pairs; the order is checked against a plain sort of the rows.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from datasets_shared import make_pairs
from lpips_core import LPIPS, metric_registry
from lpips_core.datasets import match_folders, score_pairs
from lpips_core.datasets.maps import spatial_map, worst_maps, worst_rows
from lpips_core.images import load_image

ALEX = "lpips-alex-0.1-lin-[-1,1]"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("maps")
    runs = {}
    for label, seed in (("one", 3), ("two", 4)):
        disc = match_folders(*make_pairs(root / label, n=5, seed=seed, odd_size=1))
        runs[label] = (disc, score_pairs(disc, ["mse", ALEX, "psnr"], workers=0).rows)
    return runs


@pytest.fixture(scope="module")
def alex():
    return LPIPS("alex", "0.1", True)


def test_worst_rows_are_worst_first_over_every_run(data):
    rows = {label: r for label, (_, r) in data.items()}
    everything = [(v[ALEX], label, v["key"]) for label, rs in rows.items() for v in rs]
    want = sorted(everything, key=lambda t: (-t[0], t[1], t[2]))[:4]
    got = worst_rows(rows, ALEX, k=4)
    assert [(r[ALEX], label, r["key"]) for label, r in got] == want
    # a similarity: the worst is the lowest PSNR
    low = worst_rows(rows, "psnr", k=3)
    assert [r["psnr"] for _, r in low] == sorted(r["psnr"] for rs in rows.values() for r in rs)[:3]
    # rows with an error or no value are left out; ties go by the runs' order, then by key
    tied = {"b": [{"key": "y", ALEX: 0.5, "error_kind": ""}, {"key": "x", ALEX: 0.5, "error_kind": ""}],
            "a": [{"key": "z", ALEX: 0.5, "error_kind": ""}, {"key": "w", ALEX: None, "error_kind": "unreadable"}]}
    assert [(label, r["key"]) for label, r in worst_rows(tied, ALEX, k=10)] == [("b", "x"), ("b", "y"), ("a", "z")]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            worst_rows(rows, ALEX, k=bad)


def test_each_map_is_the_reference_spatial_lpips_and_its_mean_the_rows_value(data, alex):
    from lpips_core.testing import reference_lpips

    ref = reference_lpips("alex", "0.1", True, spatial=True)
    maps = worst_maps(alex, ALEX, data, k=3)
    rows = worst_rows({label: r for label, (_, r) in data.items()}, ALEX, k=3)
    assert [(m.label, m.key) for m in maps] == [(label, r["key"]) for label, r in rows]
    for m, (label, row) in zip(maps, rows):
        pair = next(p for p in data[label][0].pairs if p.key == m.key)
        a, b = (torch.from_numpy(load_image(f).array).permute(2, 0, 1)[None] * 2 - 1 for f in (pair.reference, pair.test))
        with torch.no_grad():
            want = ref(a, b)[0, 0].numpy()
        assert m.map.shape == want.shape == m.image.shape[:2]
        np.testing.assert_allclose(m.map, want, atol=2e-6)
        assert m.value == row[ALEX]
        assert m.total == pytest.approx(m.value, abs=1e-6)
        assert float(m.map.mean()) == pytest.approx(m.total, rel=1e-3)  # the layer maps' upsampling
        np.testing.assert_array_equal(m.image, load_image(pair.test).array)


def test_a_resized_spec_maps_at_its_size_over_the_resized_test_image(data, alex):
    disc, _ = data["one"]
    pair = disc.pairs[0]
    image, m, total = spatial_map(alex, "lpips-alex@32", pair)
    assert m.shape == (32, 32) and image.shape == (32, 32, 3) and 0 <= image.min() and image.max() <= 1
    want = score_pairs([pair], ["lpips-alex@32"], workers=0).rows[0]["lpips-alex-0.1-lin-[-1,1]@32"]
    assert total == pytest.approx(want, abs=1e-6)


def test_the_model_is_the_callers_and_must_match_the_spec(data, alex, monkeypatch):
    def no_build(*args, **kwargs):
        raise AssertionError("worst_maps built a model")

    monkeypatch.setattr(metric_registry, "build", no_build)
    assert len(worst_maps(alex, ALEX, data, k=1)) == 1
    for spec in ("lpips-vgg", "lpips-alex-0.0", "lpips-alex-0.1-baseline", "stlpips-alex"):
        with pytest.raises(TypeError, match=r"needs its own model \(.*\), got lpips-alex-0.1-lin"):
            worst_maps(alex, spec, data)
    for spec in ("mse", "dists"):
        with pytest.raises(ValueError, match="no spatial map"):
            worst_maps(alex, spec, data)
    with pytest.raises(TypeError, match="needs its own model .*, got Identity"):
        worst_maps(torch.nn.Identity(), ALEX, data)


def test_a_pair_that_no_longer_decodes_says_which(data, alex, tmp_path):
    disc, rows = data["one"]
    pair = disc.pairs[0]
    broken = type(pair)(pair.key, str(tmp_path / "gone.png"), pair.test, pair.reference_name, pair.test_name)
    with pytest.raises(ValueError, match=f"{pair.key}: .*gone.png"):
        spatial_map(alex, ALEX, broken)
    with pytest.raises(ValueError, match="no such pair"):
        worst_maps(alex, ALEX, {"one": ([], rows)})
