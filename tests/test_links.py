"""Links that reproduce a view (issue 14): every page has a URL path, the view is mirrored in the
query parameters, and a malformed or hostile parameter gives a notice, never an exception.

The pure parsing and the page table are fast-tier; the AppTest runs (``app`` fixture) are full-tier.
"""

from __future__ import annotations

import ast

import numpy as np
import pytest

from apptest_helpers import frame, ok, row
from e2e.driver import LINKABLE, PAGES, REPO, app_pages
from ui import links


# --------------------------------------------------------------------------- pages and paths
def test_every_page_has_a_url_path_and_the_browser_suite_knows_them():
    tree = ast.parse((REPO / "app.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "Page"]
    assert len(calls) >= len(PAGES) >= 7
    for call in calls:
        kw = {k.arg for k in call.keywords}
        assert "url_path" in kw, f"st.Page({ast.literal_eval(call.args[0])!r}) has no url_path"
    nav, linkable = app_pages()
    assert nav == PAGES and linkable == LINKABLE
    assert nav[0] == ("Shift vs blur", "")  # the default page, at the root
    assert ("Shift vs blur", "shift_vs_blur") in linkable  # and by its own path (the hidden alias)
    paths = [p for _, p in linkable]
    assert len(paths) == len(set(paths)) and all(paths)
    assert {p for _, p in nav if p} <= set(paths)


def test_each_page_declares_the_widgets_its_links_carry():
    """A page's linked fields (``links.declare``) are its own widgets' keys, and a page that
    declares any calls ``links.declare`` first thing in its ``main()``, before drawing a widget."""
    declared = {}
    for page in sorted((REPO / "app_pages").glob("*.py")):
        text = page.read_text()
        tree = ast.parse(text)
        keys = [ast.literal_eval(n.args[0]) for n in ast.walk(tree) if isinstance(n, ast.Call)
                and getattr(n.func, "id", getattr(n.func, "attr", "")) == "Field"]
        main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
        first = next(n for n in main.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)))
        declares_first = isinstance(first, ast.Expr) and ast.unparse(first.value).startswith("links.declare(")
        for key in keys:
            assert f'key="{key}"' in text, f"{page.name} links {key!r}, which is not one of its widgets' keys"
            assert declares_first, f"{page.name} has linked fields but its main() does not begin with links.declare"
        declared[page.stem] = keys
    assert declared["shift_vs_blur"] == ["svb_present", "svb_shift", "svb_blur"]
    assert declared["distortion_lab"] == ["lab_opacity"] and declared["inside_a_layer"] == ["ial_w2"]
    assert declared["debug_a_score"] == ["dbg_opacity"]
    assert not hasattr(links, "PAGE_FIELDS")


# --------------------------------------------------------------------------- pure parsing
def test_a_chain_round_trips_compactly():
    steps = [("gaussian_blur", {"sigma": 2.5, "radius": None, "boundary": "reflect"}),
             ("jpeg", {"quality": 30, "subsampling": "4:2:0"}),
             ("kernel_blur", {"kernel": (0.2, 0.6, 0.2), "boundary": "edge"}),
             ("shift", {"dx": -1.25, "dy": 0.0, "boundary": "wrap"})]
    text = links.chain_to_param(steps)
    assert text == "gaussian_blur:sigma=2.5|jpeg:quality=30|kernel_blur:kernel=0.2/0.6/0.2,boundary=edge|shift:dx=-1.25"
    assert links.chain_from_param(text) == steps
    assert links.chain_to_param([]) == "none" and links.chain_from_param("none") == []
    # defaults are filled in for parameters the link leaves out
    assert links.chain_from_param("gaussian_blur") == [("gaussian_blur", {"sigma": 1.0, "radius": None,
                                                                          "boundary": "reflect"})]
    assert links.chain_from_param("gaussian_blur:radius=3")[0][1]["radius"] == 3


@pytest.mark.parametrize("text, says", [
    ("evil_step", "unknown distortion 'evil_step'"),
    ("jpeg:quality=abc", "quality='abc' is not a valid value"),
    ("jpeg:quality=500", "outside 1..100"),
    ("gaussian_blur:sigma=nan", "sigma='nan'"),
    ("gaussian_blur:sigma=1e999", "sigma='1e999'"),
    ("jpeg:subsampling=<script>", "is not one of"),
    ("jpeg:__class__=1", "unknown parameter '__class__'"),
    ("jpeg:quality", "unknown parameter 'quality'"),
    ("|".join(["brightness"] * 9), "9 steps (at most 8)"),
    ("brightness:delta=0.1" * 40, "characters long"),
])
def test_a_malformed_chain_is_refused_with_the_bad_part(text, says):
    with pytest.raises(ValueError, match=None) as info:
        links.chain_from_param(text)
    assert says in str(info.value)


def test_fields_and_references_are_validated():
    shift = links.Field("svb_shift", "int", 0, 8)
    assert links.parse_field(shift, "3") == 3
    for bad in ("9", "-1", "2.5", "", "inf"):
        with pytest.raises(ValueError, match="svb_shift"):
            links.parse_field(shift, bad)
    assert links.parse_field(links.Field("o", "float", 0.0, 1.0), "0.25") == 0.25
    assert links.parse_field(links.Field("p", "bool"), "0") is False
    with pytest.raises(ValueError, match="p='yes' is not 1 or 0"):
        links.parse_field(links.Field("p", "bool"), "yes")
    with pytest.raises(ValueError, match="nan"):
        links.parse_field(links.Field("o", "float", 0.0, 1.0), "nan")

    assert links.parse_ref("sample:chelsea", ["chelsea"]) == {"ref_source": "Sample photo", "ref_sample": "chelsea"}
    assert links.parse_ref("synth:texture_patch:128:5:8", []) == {
        "ref_source": "Synthetic", "ref_synth_kind": "texture patch", "ref_synth_size": 128, "ref_synth_seed": 5,
        "ref_synth_period": 8}
    assert links.ref_param("Synthetic", None, ("texture patch", 128, 5, 8)) == "synth:texture_patch:128:5:8"
    assert links.ref_param("Upload", "chelsea", None) is None  # an upload cannot be linked
    for bad in ("sample:../../etc/passwd", "synth:texture_patch:100:0:8", "synth:gradient:128", "http://x", "upload:a"):
        with pytest.raises(ValueError, match="ref="):
            links.parse_ref(bad, ["chelsea"])
    assert links.link(None, "distortion_lab", {"net": "alex", "chain": "jpeg:quality=30|brightness"}) == (
        "/distortion_lab?net=alex&chain=jpeg%3Aquality%3D30%7Cbrightness")
    # st.context.url ends with the shown page's path: the link names the page once.
    assert links.link("http://h:8501/distortion_lab", "distortion_lab", {"net": "vgg"},
                      served_path="distortion_lab") == "http://h:8501/distortion_lab?net=vgg"
    assert links.link("http://h:8501/app/shift_vs_blur/", "shift_vs_blur", {}, served_path="shift_vs_blur") == (
        "http://h:8501/app/shift_vs_blur")
    assert links.link("http://h:8501/app", "shift_vs_blur", {}, served_path="") == "http://h:8501/app/shift_vs_blur"


# --------------------------------------------------------------------------- AppTest (full tier)
LAB_LINK = {"net": "vgg", "version": "0.1", "lin": "1", "ref": "synth:texture_patch:96:3:8", "side": "256",
            "chain": "gaussian_blur:sigma=2.5|jpeg:quality=30", "lab_opacity": "0.3"}


def test_a_link_reproduces_a_distortion_lab_state(app):
    """The lab opened with a link's query parameters shows that chain on that reference, with
    LPIPS equal to the library's, and mirrors the same state back into the URL."""
    from lpips_core import LPIPS
    from lpips_explorer import synth
    from lpips_explorer.distortions import chain
    from lpips_core.sweeps import lpips_many

    at = app
    at.query_params.update(LAB_LINK)
    at.switch_page("app_pages/distortion_lab.py")
    ok(at.run())
    assert at.title[0].value == "Distortion lab"
    assert not at.warning, [w.value for w in at.warning]
    steps = links.chain_from_param(LAB_LINK["chain"])
    assert at.session_state["lab_chain"] == steps
    assert at.session_state["net"] == "vgg" and at.session_state["lab_opacity"] == 0.3
    ref = synth.texture_patch(3, size=96)
    np.testing.assert_array_equal(at.session_state["ref_image"], ref)
    dist = chain(ref, steps)
    table = frame(at, "note")
    for net, label in (("alex", "LPIPS · AlexNet"), ("vgg", "LPIPS · VGG16")):
        want = float(lpips_many(LPIPS(net), ref, [dist]).total[0])
        assert row(table, "metric", label)["value"] == pytest.approx(want, rel=1e-5)
    for key, value in LAB_LINK.items():
        assert at.query_params[key] == value, key
    assert at.query_params["device"] == "cpu" or at.query_params["device"].startswith("cuda")
    assert not at.code  # the link's expander is folded: no code block sent
    at.session_state[links.LINK_OPEN] = True
    ok(at.run())
    shown = [c.value for c in at.code]
    assert any("/distortion_lab?" in c and "chain=gaussian_blur%3Asigma%3D2.5%7Cjpeg%3Aquality%3D30" in c
               for c in shown), shown


def test_malformed_query_parameters_give_notices_not_exceptions(app):
    at = app
    at.query_params.update({"chain": "evil|<img src=x onerror=alert(1)>", "net": "resnet", "lin": "maybe",
                            "ref": "sample:../../secret", "svb_shift": "1e999", "side": "99999"})
    ok(at.run())
    assert at.title[0].value == "Shift vs blur"
    notices = " ".join(w.value for w in at.warning).replace("\\", "")  # unescape the Markdown
    for part in ("unknown distortion 'evil'", "net='resnet'", "lin='maybe'", "ref='sample:../../secret'",
                 "svb_shift='1e999'", "side='99999'"):
        assert part in notices, (part, notices)
    assert not at.exception and not at.error
    assert at.session_state["net"] == "alex" and at.session_state["ref_name"] == "sample: chelsea"
    assert at.query_params["net"] == "alex" and "chain" not in at.query_params  # the URL now shows the real view
