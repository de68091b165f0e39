"""AppTest of the "Score a dataset" page on the built-in demo set: every number equals the library's."""

from __future__ import annotations

import json

import pytest

from apptest_helpers import frame, ok, row
from lpips_core import space
from lpips_core.datasets import match_folders, parse_spec, score_pairs
from lpips_core.datasets.methods import compare_methods
from lpips_explorer.demo_dataset import make_demo
from lpips_explorer.runtime.jobs import server_scoring
from ui.text import md_escape  # st.table reads Markdown: the page escapes the tables' text (folder names)

PAGE = "app_pages/score_a_dataset.py"
NAMES = tuple(parse_spec(m).name for m in ("mse", "psnr", "ssim", "lpips-alex"))
LPIPS = NAMES[-1]


#: how the page scores: in this server process, in lanes that are its threads (values equal to
#: the bit only on the same route; the reference package is the oracle of the library's tests)
AS_THE_PAGE = server_scoring()


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    """The demo set written afresh (bit for bit the page's) and scored by the library."""
    demo = make_demo(tmp_path_factory.mktemp("demo"))
    runs = {label: score_pairs(match_folders(demo.reference, folder), NAMES, **AS_THE_PAGE)
            for label, folder in demo.methods.items()}
    runs["demo"] = demo
    return runs


def test_demo_set_scores_equal_the_library(app, expected):
    expected = dict(expected)
    demo = expected.pop("demo")
    at = ok(app.run())
    at = ok(at.switch_page(PAGE).run())
    assert at.session_state["ds_metrics"] == list(NAMES)
    at = ok(at.button(key="ds_score").click().run())

    summary = frame(at, "95% CI high")
    for label, res in expected.items():
        for name in NAMES:
            got = summary[(summary["method"] == md_escape(label))
                          & (summary["metric"] == md_escape(parse_spec(name).label))].iloc[0]
            want = res.summary["metrics"][name]
            assert got["n"] == want["n"] == 12
            assert got["mean"] == pytest.approx(want["mean"], rel=1e-12)
            assert got["std"] == pytest.approx(want["std"], rel=1e-12)
            assert [got["95% CI low"], got["95% CI high"]] == pytest.approx(want["ci95"], rel=1e-12)

    pairs = frame(at, "error_kind")
    assert len(pairs) == 24
    for label, res in expected.items():
        for r in res.rows:
            got = pairs[(pairs["method"] == label) & (pairs["key"] == r["key"])].iloc[0]
            assert [got[n] for n in NAMES] == pytest.approx([r[n] for n in NAMES], rel=1e-9)

    a, b = expected
    comp = compare_methods(expected[a].rows, expected[b].rows, NAMES, labels=(a, b))
    versus = frame(at, "A − B")
    for c in comp:
        got = row(versus, "metric", md_escape(parse_spec(c["metric"]).label))
        assert got["A − B"] == pytest.approx(c["diff"], rel=1e-12)
        assert [got["95% CI low"], got["95% CI high"]] == pytest.approx(c["ci95"], rel=1e-12)
    # the demo's point: pixel metrics prefer the blur, LPIPS the shifted noisy copy
    assert list(versus["better"]) == [md_escape(m) for m in (a, a, a, b)]
    assert any("disagree" in w.value for w in at.warning)

    # the worst pairs' maps in reading order: worst first, numbered, the metric's full label
    charts = at.get("plotly_chart")
    assert len(charts) == 1 + 10  # the distributions and the ten worst pairs' maps
    worst = sorted(((r[LPIPS], label, r["key"]) for label, res in expected.items() for r in res.rows),
                   key=lambda t: -t[0])[:10]
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in charts[1:]]
    assert titles == [f"{i}. {label} · {key} · {v:.4f}" for i, (v, label, key) in enumerate(worst, 1)]

    # each folder's diversity: lpips_core.space.diversity of its embedding (jackknife over images)
    at.session_state["ds_diversity"] = True
    at = ok(at.run())
    div = frame(at, "diversity")
    spec = parse_spec(LPIPS)
    model = spec.build("cpu")
    folders = {"reference": demo.reference, **demo.methods}
    assert list(div["folder"]) == [md_escape(f) for f in folders]
    for (_, got), folder in zip(div.iterrows(), folders.values()):
        want = space.diversity(space.embed(model, folder, spec=spec))
        assert got["images"] == 12
        assert [got["diversity"], got["95% CI low"], got["95% CI high"]] == pytest.approx(
            [want["mean"], *want["ci95"]], rel=1e-6)
    assert any("LPIPS space" in link.label for link in at.get("page_link"))


def test_explain_finds_the_vgg_number_first(app, expected):
    """A number made with LPIPS · VGG16 on the blur's pairs, written "LPIPS (VGG)": the page reads
    the name, searches VGG16 only, ranks LPIPS · VGG16 first (its 96-px twin merged into the row, as
    the demo's images are 96 px) and says how many configurations hold the number."""
    demo = expected["demo"]
    vgg = parse_spec("lpips-vgg")
    reported = score_pairs(match_folders(demo.reference, demo.methods["A-blur"]), [vgg.name],
                           workers=0).summary["metrics"][vgg.name]["mean"]
    at = ok(app.run())
    at = ok(at.switch_page(PAGE).run())
    at = ok(at.multiselect(key="ds_metrics").set_value(["mse"]).run())
    at = ok(at.button(key="ds_score").click().run())
    assert at.selectbox(key="ds_explain_method").value == "A-blur"
    at = ok(at.text_input(key="ds_written").set_value("LPIPS (VGG)").run())
    assert at.session_state["ds_explain_nets"] == ["vgg"]  # the name narrowed the backbones
    assert any(c.value.startswith("The name says: backbone VGG16 (from 'VGG').") for c in at.caption)
    assert at.multiselect(key="ds_explain_sizes").options == ["native", "64×64 px", "96×96 px", "224×224 px", "256×256 px"]
    at.number_input(key="ds_reported").set_value(reported)
    at = ok(at.multiselect(key="ds_explain_sizes").set_value(["native", 96]).run())
    at = ok(at.button(key="ds_explain_go").click().run())

    ex = at.session_state["ds_explained"][1]
    shown = frame(at, "same values")
    top = shown.iloc[0]
    assert top["configuration"] == "LPIPS · VGG16" and top["★"] == "★" and top["name"] == "✓"
    assert top["mean"] == pytest.approx(reported, rel=1e-6) and abs(top["z"]) < 1e-4
    assert top["same values"] == md_escape("LPIPS · VGG16 (96 px)")  # equal values on 96-px images: one row
    assert set(shown["configuration"].str.slice(0, 13)) == {"LPIPS · VGG16"}  # VGG16 only
    assert len(shown) == 10 and len(ex["candidates"]) == 24  # 48 configurations, merged in pairs
    holding = sum(c["holds_reported"] for c in ex["candidates"])
    assert ex["verdict"] == ("one" if holding == 1 else "several")
    sentence = (f"One configuration's 95% interval holds {reported:g}: {vgg.name}." if holding == 1 else
                f"{holding} configurations' 95% intervals hold {reported:g}: this data cannot tell them apart "
                "(more pairs narrow the intervals).")
    shown_verdict = at.success if holding == 1 else at.warning
    assert [m.value.replace("\\", "") for m in shown_verdict] == [sentence]


def _zip(members: dict[str, bytes]) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_zip_upload_is_guarded_then_scored(app, tmp_path):
    """A zip-slip archive is refused with the guard's message; a good one is scored like the library."""
    at = ok(app.run())
    at = ok(at.switch_page(PAGE).run())
    at = ok(at.radio(key="ds_source").set_value("A zip of folders").run())
    evil = _zip({"gt/a.png": b"x", "../../evil.png": b"x"})
    at = ok(at.file_uploader(key="ds_zip").set_value(("evil.zip", evil, "application/zip")).run())
    assert any("The zip was refused" in e.value and "climbs out" in e.value for e in at.error)
    assert not (tmp_path.parent / "evil.png").exists()

    demo = make_demo(tmp_path / "demo", side=64, per_image=1)
    members = {f"set/{folder}/{n}": (src / n).read_bytes() for n in demo.names[:3]
               for folder, src in (("gt", demo.reference), ("mine", demo.methods["B-shift-noise"]))}
    at = ok(at.file_uploader(key="ds_zip").set_value(("good.zip", _zip(members), "application/zip")).run())
    assert at.selectbox(key="ds_zip_ref").value == "gt" and at.selectbox(key="ds_zip_a").value == "mine"
    assert at.selectbox(key="ds_zip_b").value == "(none)"
    at.multiselect(key="ds_metrics").set_value(["mse", LPIPS])
    at = ok(at.button(key="ds_score").click().run())
    ref, mine = tmp_path / "gt", tmp_path / "mine"
    for name, data in members.items():
        _, folder, n = name.split("/")
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / n).write_bytes(data)
    want = score_pairs(match_folders(ref, mine), ["mse", LPIPS], **AS_THE_PAGE)
    summary = frame(at, "95% CI high")
    assert list(summary["metric"]) == ["MSE", "LPIPS · AlexNet"] and set(summary["method"]) == {"mine"}
    assert list(summary["mean"]) == pytest.approx([want.summary["metrics"][m]["mean"] for m in ("mse", LPIPS)],
                                                  rel=1e-12)
    assert not any("A − B" in t.value.columns for t in at.table)  # one method only
    assert len(at.get("plotly_chart")) == 1 + 3


def test_two_sets_of_files_are_paired_by_name(app, tmp_path):
    """Uploaded files land in a temp folder under their base names only; pairs are matched by name."""
    demo = make_demo(tmp_path / "demo", side=48, per_image=1)
    at = ok(app.run())
    at = ok(at.switch_page(PAGE).run())
    at = ok(at.radio(key="ds_source").set_value("Two sets of files").run())
    refs = [(f"../../{n}", (demo.reference / n).read_bytes(), "image/png") for n in demo.names[:3]]
    tests = [(n, (demo.methods["A-blur"] / n).read_bytes(), "image/png") for n in demo.names[1:4]]
    at.file_uploader(key="ds_files_ref").set_value(refs)
    at = ok(at.file_uploader(key="ds_files_test").set_value(tests).run())
    root = tmp_path.__class__(at.session_state["ds_files_root"][1])
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.png")) == sorted(
        [f"reference/{n}" for n in demo.names[:3]] + [f"test/{n}" for n in demo.names[1:4]])
    at = ok(at.multiselect(key="ds_metrics").set_value(["mse"]).run())
    at = ok(at.button(key="ds_score").click().run())
    assert any("test: 2 pairs · 0 skipped" in c.value and "unmatched: 1 reference, 1 test" in c.value
               for c in at.caption)
