"""lpips_explorer.dataset_view: the "Score a dataset" page's tables, the name's reading, the explain
table and search line, the offered sizes and each folder's diversity, computed without Streamlit."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from lpips_core import space
from lpips_core.datasets import match_folders, parse_spec, score_pairs
from lpips_core.datasets.explain import explain
from lpips_core.images import load_image
from lpips_explorer import dataset_view as view
from lpips_explorer.demo_dataset import make_demo

LPIPS = parse_spec("lpips-alex")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """Six 32-px pairs of the demo set (one patch per photo)."""
    return make_demo(tmp_path_factory.mktemp("demo") / "demo", side=32, per_image=1)


@pytest.fixture(scope="module")
def explained(demo):
    """AlexNet v0.1 searched at native size and at 32 px: on 32-px images the two give the same
    values, so every row merges its 32-px twin."""
    disc = match_folders(demo.reference, demo.methods["A-blur"])
    return explain(disc, 0.1, name="LPIPS-Alex", nets=["alex"], versions=["0.1"], sizes=[None, 32],
                   workers=0).to_json()


def test_summary_and_pairs_frames_name_metrics_by_label(demo):
    runs = {"A-blur": score_pairs(match_folders(demo.reference, demo.methods["A-blur"]), ["mse", LPIPS.name],
                                  workers=0)}
    summary = view.summary_frame(runs)
    assert list(summary["metric"]) == ["MSE", "LPIPS · AlexNet"]
    assert list(summary["spec"]) == ["mse", LPIPS.name]
    s = runs["A-blur"].summary["metrics"][LPIPS.name]
    got = summary.iloc[1]
    assert [got["n"], got["mean"], got["std"], got["95% CI low"], got["95% CI high"]] == [
        s["n"], s["mean"], s["std"], *s["ci95"]]
    pairs = view.pairs_frame(runs)
    assert list(pairs.columns[:3]) == ["method", "index", "key"] and len(pairs) == 6
    assert set(pairs["reference_size"]) == {"32x32"}  # the size columns are text


def test_name_reading():
    vgg = view.name_reading("LPIPS (VGG)", ["alex", "vgg"])
    assert (vgg.nets, vgg.missing, vgg.narrows) == (["vgg"], [], True)
    assert vgg.text == "The name says: backbone VGG16 (from 'VGG')."
    off = view.name_reading("LPIPS (VGG)", ["alex"])
    assert (off.nets, off.missing) == ([], ["vgg"])
    plain = view.name_reading("LPIPS", ["alex", "vgg"])
    assert (plain.nets, plain.narrows) == (["alex", "vgg"], False)
    assert plain.text.startswith("The name says nothing about the backbone")
    assert view.name_reading("  ", ["alex"]).text == "No name given: every configuration is searched."


def test_explain_frame_merges_equal_configurations(explained):
    frame = view.explain_frame(explained, top=None)
    assert list(frame.columns) == ["★", "configuration", "mean", "95% CI", "z", "name", "same values", "spec"]
    # 24 configurations, 12 rows: each native configuration carries its 32-px twin
    assert len(frame) == 12
    for label, same in zip(frame["configuration"], frame["same values"]):
        assert same == (label[:-1] + ", 32 px)" if label.endswith(")") else label + " (32 px)")
    c = explained["candidates"][0]
    assert frame.iloc[0]["configuration"] == c["label"] and frame.iloc[0]["spec"] == c["config"]
    assert frame.iloc[0]["mean"] == c["mean"] and frame.iloc[0]["z"] == c["z"]
    assert frame.iloc[0]["95% CI"] == f"{c['ci95'][0]:.4f}–{c['ci95'][1]:.4f}"
    assert list(frame["★"]) == ["★" if c["holds_reported"] else "" for c in explained["candidates"]]
    assert list(frame["name"]) == ["✓"] * 12  # the name narrowed the search to AlexNet
    assert len(view.explain_frame(explained, top=3)) == 3
    assert view.search_text(explained) == ("AlexNet × v0.1 × lin, baseline × 3 input ranges × colour, gray × "
                                           "native, 32 px: 24 configurations, 12 rows (the others give the "
                                           "same values here)")
    nameless = dict(explained, name=None)
    assert "name" not in view.explain_frame(nameless).columns


def test_explain_sizes_offers_the_images_own_side():
    rows = [{"reference_size": "96x96", "error_kind": ""}, {"reference_size": "", "error_kind": "decode"}]
    assert view.explain_sizes(rows) == ["native", 64, 96, 224, 256]
    assert view.explain_sizes([{"reference_size": "256x256", "error_kind": ""}]) == ["native", 64, 224, 256]
    mixed = [{"reference_size": "96x96", "error_kind": ""}, {"reference_size": "64x48", "error_kind": ""}]
    assert view.explain_sizes(mixed) == ["native", 64, 224, 256]
    assert view.explain_sizes([{"reference_size": "64x48", "error_kind": ""}]) == ["native", 64, 224, 256]


def test_folder_diversity_is_the_spaces_with_its_jackknife(demo):
    """Each folder's row is space.diversity of its embedding; its mean is also the plain mean of
    the model's distance over every pair of the folder's images (the independent check)."""
    model = LPIPS.build("cpu")
    folders = {"reference": demo.reference, "A-blur": demo.methods["A-blur"]}
    got = view.folder_diversity(model, LPIPS, folders)
    assert list(got.columns) == ["folder", "images", "diversity", "95% CI low", "95% CI high", "note"]
    for (_, r), folder in zip(got.iterrows(), folders.values()):
        want = space.diversity(space.embed(model, folder, spec=LPIPS))
        assert r["images"] == 6 and r["note"] == ""
        assert [r["diversity"], r["95% CI low"], r["95% CI high"]] == [want["mean"], *want["ci95"]]
        imgs = [LPIPS.prepare(load_image(p).array) for p in sorted(folder.iterdir())]
        with torch.no_grad():
            plain = np.mean([float(model(a, b)) for a, b in itertools.combinations(imgs, 2)])
        assert r["diversity"] == pytest.approx(plain, rel=1e-5)
    with pytest.raises(ValueError, match="not a distance between embeddings"):
        view.folder_diversity(model, "mse", folders)


def test_folder_diversity_explains_a_folder_without_a_value(demo, tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "a.png").write_bytes((demo.reference / demo.names[0]).read_bytes())
    got = view.folder_diversity(LPIPS.build("cpu"), LPIPS, {"one": tmp_path / "one"})
    assert got.iloc[0]["diversity"] is None and "at least 2 images" in got.iloc[0]["note"]
