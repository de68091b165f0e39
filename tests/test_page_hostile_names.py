"""AppTest ("One reader, one writer", row 11): folder and file names that are HTML or Markdown
(``<a href=...>``, ``<b>``) in an uploaded zip reach the pages' figures and text escaped, never as markup.

The figure builders themselves: ``test_hostile_names.py`` (fast tier).
"""

from __future__ import annotations

import io
import json
import re
import zipfile

from apptest_helpers import frame, ok
from lpips_explorer.demo_dataset import make_demo
from lpips_explorer.text import plotly_escape
from ui.text import md_escape

LINK = '<a href="https:evil">grp'  # a folder: no "/" can be in a name, so the tag is left open
BOLD = "<b>bold.png"
ITALIC = "[x](https:evil)<i>it.png"


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _strings(obj) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def _assert_no_markup(spec: dict) -> None:
    for s in _strings(spec):
        if not s.startswith("data:image"):
            assert not re.search(r"<(?!br>|extra>|/extra>)", s), s


def test_space_page_escapes_hostile_names(app, tmp_path):
    demo = make_demo(tmp_path / "demo", side=64, per_image=1)
    src = [(demo.reference / n).read_bytes() for n in demo.names[:4]]
    members = {f"set/{LINK}/a.png": src[0], f"set/{BOLD}": src[1], f"set/{ITALIC}": src[2], "set/plain.png": src[3]}
    at = ok(app.run())
    at = ok(at.switch_page("app_pages/lpips_space.py").run())
    at = ok(at.radio(key="sp_source").set_value("A zip of images").run())
    at = ok(at.file_uploader(key="sp_zip").set_value(("hostile.zip", _zip(members), "application/zip")).run())
    assert any(c.value.startswith("Over all 6 pairs of 4 images") for c in at.caption)
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    the_map, strip = charts[0], charts[1]
    for spec in charts:
        _assert_no_markup(spec)
    assert plotly_escape(LINK) in {t["name"] for t in the_map["data"]}  # the legend: the folder, escaped
    hover = [t for tr in the_map["data"] for t in (tr.get("text") or [])]
    assert any(h.startswith(plotly_escape(BOLD)) for h in hover)
    assert any(h.startswith(plotly_escape(f"{LINK}/a.png")) for h in hover)
    names = sorted(members)  # the page's names: relative to set/, sorted
    assert {t["name"] for t in strip["data"]} <= {plotly_escape(n.removeprefix("set/")) for n in names}
    # Markdown: the nearest-images caption and the pairs' lines and image captions escape the names
    text = " ".join([m.value for m in at.markdown] + [c.value for c in at.caption])
    captions = [c for el in at.get("image") for c in el.captions]  # st.image captions are Markdown too
    assert len(captions) >= 4 and all(md_escape(c.replace("\\", "")) == c for c in captions), captions
    text = " ".join([text, *captions])
    assert not re.search(r"(?<!\\)<|(?<!\\)\]\(", text), text  # every "<" and "](" escaped
    assert md_escape(BOLD) in text or md_escape(ITALIC) in text or md_escape(f"{LINK}/a.png") in text


def test_dataset_page_escapes_hostile_folder_names(app, tmp_path):
    demo = make_demo(tmp_path / "demo", side=48, per_image=1)
    ref, meth = "gt", LINK
    members = {f"set/{folder}/{n}": (src / n).read_bytes() for n in demo.names[:3]
               for folder, src in ((ref, demo.reference), (meth, demo.methods["A-blur"]),
                                   (BOLD, demo.methods["B-shift-noise"]))}
    at = ok(app.run())
    at = ok(at.switch_page("app_pages/score_a_dataset.py").run())
    at = ok(at.radio(key="ds_source").set_value("A zip of folders").run())
    at = ok(at.file_uploader(key="ds_zip").set_value(("hostile.zip", _zip(members), "application/zip")).run())
    at = ok(at.selectbox(key="ds_zip_ref").set_value(ref).run())  # "href" reads as a reference folder's name
    at = ok(at.selectbox(key="ds_zip_a").set_value(meth).run())
    at = ok(at.selectbox(key="ds_zip_b").set_value(BOLD).run())
    at = ok(at.multiselect(key="ds_metrics").set_value(["mse", "lpips-alex-0.1-lin-[-1,1]"]).run())
    at = ok(at.button(key="ds_score").click().run())
    # the subheader, the verdict and the captions: Markdown with the names escaped
    shown = [h.value for h in at.subheader] + [m.value for m in (*at.success, *at.warning, *at.caption)]
    assert f"{md_escape(meth)} vs {md_escape(BOLD)}" in shown
    assert not any(re.search(r"(?<!\\)<", s) for s in shown), shown
    # st.table reads Markdown too: its text cells are escaped (st.dataframe shows them as they are)
    summary = frame(at, "95% CI high")
    assert set(summary["method"]) == {md_escape(meth), md_escape(BOLD)}
    for c in at.get("plotly_chart"):
        _assert_no_markup(json.loads(c.proto.spec))
