"""Chromium: upload a small zip of folders on "Score a dataset", score it, see the per-pair table and a map.

The zip holds four demo pairs (``small/gt/*.png`` and ``small/ours/*.png``); the page must pick
``gt`` as the reference, score the pairs and show each pair's LPIPS equal to the library's (the
grid's accessible table holds the raw values), and the worst pairs' spatial maps.
"""

from __future__ import annotations

import io
import zipfile

from lpips_core.datasets import match_folders, parse_spec, score_pairs
from lpips_explorer.demo_dataset import make_demo

from .driver import OUT

LPIPS = parse_spec("lpips-alex").name


def _small_zip(tmp_path) -> tuple[bytes, dict[str, float]]:
    demo = make_demo(tmp_path / "demo")
    names = demo.names[:4]
    ref, ours = tmp_path / "gt", tmp_path / "ours"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for n in names:
            for folder, src in (("gt", demo.reference), ("ours", demo.methods["A-blur"])):
                data = (src / n).read_bytes()
                zf.writestr(f"small/{folder}/{n}", data)
                (tmp_path / folder).mkdir(exist_ok=True)
                (tmp_path / folder / n).write_bytes(data)
    res = score_pairs(match_folders(ref, ours), ["mse", LPIPS], workers=0)
    return buf.getvalue(), {r["key"]: r[LPIPS] for r in res.rows}


def test_upload_a_zip_and_see_the_table_and_a_map(app_page, tmp_path):
    data, want = _small_zip(tmp_path)
    ap = app_page
    ap.open("score_a_dataset")
    ap.wait_until(lambda: ap.title() == "Score a dataset", "the dataset page")
    main = ap.page.get_by_test_id("stMain")
    ap.choose_radio("A zip of folders")
    uploader = main.get_by_test_id("stFileUploader").locator("input[type=file]")
    uploader.wait_for(state="attached")
    ap.rerun(lambda: uploader.set_input_files(files=[{"name": "small.zip", "mimeType": "application/zip",
                                                      "buffer": data}]))
    ap.wait_until(lambda: "Reference folder" in ap.main_text(), "the folder pickers")
    ap.rerun(lambda: main.get_by_role("button", name="Score", exact=True).click())

    def pair_table():
        for rows in ap.tables():
            if rows and "error_kind" in rows[0] and len(rows) == 1 + len(want):
                return rows
        return None

    rows = ap.wait_until(pair_table, "the per-pair table")
    header = rows[0]
    shown = {r[header.index("key")]: float(r[header.index(LPIPS)]) for r in rows[1:]}
    assert set(shown) == set(want)
    for key, value in want.items():
        assert abs(shown[key] - value) < 1e-6, (key, shown[key], value)
    assert {r[header.index("method")] for r in rows[1:]} == {"ours"}

    worst = max(want, key=want.get)
    title = f"ours · {worst} · {want[worst]:.4f}"
    ap.wait_until(lambda: ap.page.locator("[data-testid='stPlotlyChart'] .gtitle").filter(has_text=title).count(),
                  f"the worst pair's map titled {title!r}")
    assert ap.page.locator("[data-testid='stPlotlyChart'] .heatmaplayer").count() >= len(want)
    ap.assert_alive()
    ap.screenshot("score-a-dataset")
    ap.server.assert_healthy()
    assert OUT.exists()
