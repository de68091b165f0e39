"""AppTest of the "LPIPS space" page: on the demo set its number, map and neighbours equal the library's;
a hostile zip is refused by the guard, a good one is mapped."""

from __future__ import annotations

import io
import json
import re
import zipfile

import numpy as np
import pytest

from apptest_helpers import ok
from lpips_core import LPIPS, space
from lpips_explorer.demo_dataset import make_demo
from ui.text import md_escape

PAGE = "app_pages/lpips_space.py"


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    """The demo set written afresh (bit for bit the page's), embedded and searched by the library."""
    root = tmp_path_factory.mktemp("demo")
    make_demo(root)
    emb = space.embed(LPIPS("alex", device="cpu"), root)
    d = space.pairwise_distances(emb)
    return emb.names, d, space.jackknife_interval(d), space.nearest(emb, emb, 5)


def test_demo_set_map_number_and_neighbours(app, expected):
    names, d, stats, nn = expected
    at = ok(app.run())
    at = ok(at.switch_page(PAGE).run())
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Diversity (mean LPIPS)"] == f"{stats['mean']:.4f}"
    lo, hi = stats["ci95"]
    assert metrics["95 % interval"] == f"{lo:.4f}–{hi:.4f}"
    assert any(c.value.startswith("Over all 630 pairs of 36 images; lpips-alex-0.1-lin-[-1,1] at 96×96 px (width×height)")
               for c in at.caption)
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(charts) == 4  # the map, the strip, the two pairs' maps
    the_map, strip = charts[0], charts[1]
    points = sorted(i for t in the_map["data"] if t.get("customdata") is not None and t["name"] != "query"
                    for i in t["customdata"])
    assert points == list(range(36)) and len(the_map["layout"]["images"]) == 36
    assert {t["name"] for t in the_map["data"]} == {"reference", "A-blur", "B-shift-noise", "query"}
    # the strip: the query (the first name) and its 5 nearest others, nearest first, with their distances
    titles = [a["text"] for a in strip["layout"]["annotations"]]
    assert titles == ["query"] + [f"{r} · {v:.4f}" for r, v in enumerate(nn.distances[0], 1)]
    assert [t["name"] for t in strip["data"]] == [names[0]] + [names[j] for j in nn.indices[0]]
    # another query, and fewer neighbours
    at.selectbox(key="sp_query").set_value("reference/chelsea-0.png")
    at = ok(at.slider(key="sp_k").set_value(3).run())
    q = names.index("reference/chelsea-0.png")
    strip = json.loads(at.get("plotly_chart")[1].proto.spec)
    assert [t["name"] for t in strip["data"]] == [names[q]] + [names[j] for j in nn.indices[q][:3]]
    assert [a["text"] for a in strip["layout"]["annotations"]][1:] == [
        f"{r} · {v:.4f}" for r, v in enumerate(nn.distances[q][:3], 1)]
    # the closest and farthest pairs, with the mean of their spatial maps equal to their distance
    iu = np.triu_indices(len(names), 1)
    lo_pair = (iu[0][np.argmin(d[iu])], iu[1][np.argmin(d[iu])])
    text = " ".join(m.value for m in at.markdown)
    assert f"**Closest**: {md_escape(names[lo_pair[0]])} and {md_escape(names[lo_pair[1]])}, LPIPS {d[lo_pair]:.4f}" \
        in text
    pair_maps = [json.loads(c.proto.spec) for c in at.get("plotly_chart")[2:]]
    # the map's title and the sentence write the pair's one number with the same function: they agree
    assert pair_maps[0]["layout"]["title"]["text"] == f"spatial map · LPIPS {d[lo_pair]:.4f}"
    hi_pair = (iu[0][np.argmax(d[iu])], iu[1][np.argmax(d[iu])])
    assert f"LPIPS {d[hi_pair]:.4f}" in text and pair_maps[1]["layout"]["title"]["text"].endswith(f"{d[hi_pair]:.4f}")
    # the diversity beside its reference points: near-duplicates lowest, this set (the demo) among them
    scale = " ".join(h.proto.body for h in at.get("html") if "sp-diversity-scale" in h.proto.body)
    labels = re.findall(r'data-label="([^"]+)" data-value="([^"]+)"', scale)
    assert [name for name, _ in labels] == ["one image, faint noise", "independent noise", "different photos",
                                             "this set: the demo set"]
    assert float(labels[-1][1]) == pytest.approx(stats["mean"]) and float(labels[0][1]) < 0.02


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_zip_upload_is_guarded_then_mapped(app, tmp_path):
    at = ok(app.run())
    at = ok(at.switch_page(PAGE).run())
    at = ok(at.radio(key="sp_source").set_value("A zip of images").run())
    evil = _zip({"set/a.png": b"x", "../../evil.png": b"x"})
    at = ok(at.file_uploader(key="sp_zip").set_value(("evil.zip", evil, "application/zip")).run())
    assert any("The zip was refused" in e.value and "climbs out" in e.value for e in at.error)
    demo = make_demo(tmp_path / "demo", side=64, per_image=1)
    members = {f"mine/{n}": (demo.reference / n).read_bytes() for n in demo.names[:4]}
    members["mine/other/wide.png"] = (demo.reference / demo.names[0]).read_bytes()
    at = ok(at.file_uploader(key="sp_zip").set_value(("good.zip", _zip(members), "application/zip")).run())
    assert any(c.value.startswith("Over all 10 pairs of 5 images") for c in at.caption)
    # a copy of an image under another name is its nearest neighbour, at distance 0
    strip = json.loads(at.get("plotly_chart")[1].proto.spec)
    assert strip["data"][1]["name"] == "other/wide.png" and strip["layout"]["annotations"][1]["text"] == "1 · 0.0000"


def test_mixed_sizes_ask_for_a_working_size_and_squeezenet_stops_cleanly(app, tmp_path):
    small = make_demo(tmp_path / "a", side=64, per_image=1)
    big = make_demo(tmp_path / "b", side=96, per_image=1)
    members = {f"s/{n}": (small.reference / n).read_bytes() for n in small.names[:2]}
    members["s/big.png"] = (big.reference / big.names[0]).read_bytes()
    at = ok(app.run())
    at = ok(at.switch_page(PAGE).run())
    at = ok(at.radio(key="sp_source").set_value("A zip of images").run())
    at = ok(at.file_uploader(key="sp_zip").set_value(("mixed.zip", _zip(members), "application/zip")).run())
    assert any("LPIPS compares images of one size" in e.value for e in at.error)
    at = ok(at.selectbox(key="sp_size").set_value(64).run())
    assert any(c.value.startswith("Over all 3 pairs of 3 images; lpips-alex-0.1-lin-[-1,1]@64 at 64×64 px (width×height)")
               for c in at.caption)
    from ui.choices import DEFAULT_SPEC
    from ui.models import availability

    if not availability(DEFAULT_SPEC.replace(net="squeeze"))[0]:  # no SqueezeNet weights offline: the reason, no traceback
        at = ok(at.selectbox(key="net").set_value("squeeze").run())
        assert any("unavailable" in w.value for w in at.warning) and not at.get("plotly_chart")
