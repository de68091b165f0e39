"""Hostile file names reach neither a terminal nor a page as markup ("One reader, one writer", rows 10-11).

Row 10: a name holding a newline (``zz.png\\n  0.000000  astronaut-COPY.png``) forged a row of
``python -m lpips_core neighbours``, one holding ``ESC]0;...`` retitled the terminal. Every CLI text
line now goes through :func:`lpips_core.cells.printable`; ``--json`` keeps the raw names.
Row 11: folder and file names such as ``<a href=...>`` went unescaped into the "LPIPS space" map's
legend and hover text; the figures now write them through :func:`lpips_explorer.text.plotly_escape`.
(The page itself, with such a zip: ``test_page_hostile_names.py``, full tier.)
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from lpips_core.__main__ import main
from lpips_core.cells import escape_name, printable, unescape_name
from lpips_explorer.text import plotly_escape

FORGED = "zz.png\n  0.000000  astronaut-COPY.png"
TITLE = "title\x1b]0;pwned\x07.png"
HOSTILE = [FORGED, TITLE, "nel\x85.png", "ls\u2028ps\u2029.png", "tab\tcr\r.png", "del\x7f.png", "csi\x9b2J.png",
           "nul\x00.png", "back\\slash.png", "back\\n.png", "bad\udcff.png", "lone\ud800.png"]
HTML = ['<a href="https:x">link.png', "<b>bold</b>.png", "a & b &amp; c.png"]


# --------------------------------------------------------------------------- (a) printable
@pytest.mark.parametrize("text, want", [
    ("plain name.png", "plain name.png"),
    ("café 😀 <b>x</b> ü.png", "café 😀 <b>x</b> ü.png"),  # only control characters change: markup is the page's job
    (FORGED, "zz.png\\n  0.000000  astronaut-COPY.png"),
    (TITLE, "title\\x1b]0;pwned\\x07.png"),
    ("a\rb\tc", "a\\rb\\tc"),
    ("\x00\x01\x1f\x7f", "\\x00\\x01\\x1f\\x7f"),
    ("nel\x85 csi\x9b c1\x80\x9f", "nel\\u0085 csi\\u009b c1\\u0080\\u009f"),
    ("ls\u2028ps\u2029", "ls\\u2028ps\\u2029"),
    ("back\\slash", "back\\\\slash"),
    ("back\\n", "back\\\\n"),  # a backslash and an n: not the newline's \n
    ("bad\udcff.png", "bad\\xff.png"),  # a non-UTF-8 byte, as escape_name writes it
    ("lone\ud800", "lone\\ud800"),
])
def test_printable_escapes_control_characters_only(text, want):
    assert printable(text) == want


def test_printable_is_one_visible_line_and_tells_names_apart():
    outs = [printable(t) for t in HOSTILE]
    for out in outs:
        assert len(out.splitlines()) == 1 and "\x1b" not in out
        assert all(ch.isprintable() for ch in out), out
        out.encode("utf-8")  # no lone surrogate left
    assert len(set(outs)) == len(HOSTILE)  # the escaping keeps distinct names distinct
    # without control characters it is escape_name's form, which unescape_name inverts
    for name in ("back\\slash.png", "bad\udcff.png", "ok.png"):
        assert printable(name) == escape_name(name) and unescape_name(printable(name)) == name
    assert printable(3) == "3"


def test_printable_without_backslash_for_already_quoted_messages():
    message = f"folder {'/tmp/q' + chr(27) + '[31m'!r} does not exist"  # repr has escaped it already
    assert printable(message, backslash=False) == message
    assert printable("a\\b\x1b\n", backslash=False) == "a\\b\\x1b\\n"


# --------------------------------------------------------------------------- (b) the CLI
def _run(capsys, *args) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile") / "d"
    d.mkdir()
    rng = np.random.default_rng(0)
    try:
        for name in ("astronaut.png", FORGED, TITLE):
            Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(d / name, format="PNG")
    except (OSError, ValueError) as exc:  # a file system that refuses such names has nothing to forge
        pytest.skip(f"this file system refuses the names: {exc}")
    return d


def test_neighbours_text_escapes_names_and_json_keeps_them(capsys, hostile_dir):
    code, out, err = _run(capsys, "neighbours", hostile_dir, hostile_dir, "--net", "alex", "--k", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert "\x1b" not in out + err and "\x07" not in out
    # header, then per query: its name and k rows; no name adds a line, so no row is forged
    assert len(lines) == 1 + 3 * (1 + 2), lines
    rows = [line for line in lines[1:] if line.startswith("  ")]
    assert len(rows) == 6 and all(re.fullmatch(r"  \d\.\d{6}  \S.*", r) for r in rows), rows
    assert not any(line.startswith("  0.000000  astronaut-COPY.png") for line in lines)
    assert printable(FORGED) in lines and printable(TITLE) in lines  # the queries, escaped
    assert any(r.endswith("  zz.png\\n  0.000000  astronaut-COPY.png") for r in rows)
    assert any(r.endswith("  title\\x1b]0;pwned\\x07.png") for r in rows)

    code, out, err = _run(capsys, "neighbours", hostile_dir, hostile_dir, "--net", "alex", "--k", "2", "--json")
    assert code == 0, err
    assert "\x1b" not in out and len(out.splitlines()) == 1  # json.dumps writes \u001b, \n
    got = json.loads(out)
    assert {q["query"] for q in got["queries"]} == {"astronaut.png", FORGED, TITLE}
    assert {n["name"] for q in got["queries"] for n in q["neighbours"]} == {"astronaut.png", FORGED, TITLE}


@pytest.mark.parametrize("command", [
    ["neighbours", "{bad}", "{bad}"],
    ["score", "{bad}", "{bad}"],
    ["compare", "{bad}.png", "{bad}.png"],
    ["compare", "a.png", "b.png", "{bad}"],  # argparse's "unrecognized arguments" line
])
def test_error_lines_escape_names(capsys, tmp_path, command):
    bad = str(tmp_path / "no\x1b]0;pwned\x07\n  0.000000  forged")
    code, out, err = _run(capsys, *[a.replace("{bad}", bad) for a in command])
    assert code == 2 and out == ""
    errors = [line for line in err.splitlines() if not line.startswith("lpips-explorer: ")]  # the app's log lines
    assert len(errors) == 1 and errors[0].startswith("error: ")
    assert "\x1b" not in err and "\x07" not in err and "\\x1b]0;pwned" in err


def test_other_printers_escape_paths_and_names(capsys):
    from lpips_core.cli.diversity import print_diversity
    from lpips_core.cli.embed import print_embed
    from lpips_core.cli.explain import print_explain

    bad = "m\x1b[2J\n.npy"
    print_diversity({"config": {"images": 3, "pairs": 3, "matrix": bad}, "skipped": 0,
                     "metrics": {"lpips-alex": {"n": 3, "mean": 0.5, "std": 0.1, "ci95": [0.4, 0.6]}}})
    print_embed({"shard": [1, 1], "count": 3, "images_total": 3, "config": {"spec": "lpips-alex"}, "dim": 10,
                 "phi": {"file": bad}, "skipped": []})
    name = "LPIPS\x1b]0;x\x07\n(VGG)"
    print_explain({"reported": 0.1, "name": name, "pairs": 3, "hints": {},
                   "searched": {"narrowed_by_name": False, "nets": ["alex"], "versions": ["0.1"], "lin": [True],
                                "conventions": ["[-1,1]"], "grayscale": [False], "sizes": ["native"]},
                   "candidates": [], "sentence": f"No configuration holds 0.1 ({name}).", "unavailable": {},
                   "skipped": {}})
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert f"matrix: {printable(bad)}" in out.splitlines()
    assert out.splitlines()[-1] == f"No configuration holds 0.1 ({printable(name)})."
    assert any(line.endswith(f"10 floats each, {printable(bad)}") for line in out.splitlines())
    assert out.splitlines()[len(out.splitlines()) - 6].startswith(f"reported 0.1 ({printable(name)})")


# --------------------------------------------------------------------------- (c) the figures
def _strings(obj) -> list[str]:
    """Every string in a figure's dict (trace names, texts, hover templates, titles, annotations)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [s for v in obj for s in _strings(v)]
    return []


def _no_markup(fig) -> list[str]:
    """The figure's strings, asserting that no user text became a tag (only the app's ``<br>``/``<extra>``)."""
    strings = [s for s in _strings(fig.to_dict()) if not s.startswith("data:image")]
    for s in strings:
        assert not re.search(r"<(?!br>|extra>|/extra>)", s), s
    return strings


def test_plotly_escape():
    assert plotly_escape('<a href="x">a & b</a>') == '&lt;a href="x"&gt;a &amp; b&lt;/a&gt;'
    assert plotly_escape("&lt;") == "&amp;lt;"  # shows as written, not as "<"
    assert plotly_escape("plain-name_1.png") == "plain-name_1.png"


def test_space_map_escapes_names_groups_and_nearest():
    from lpips_explorer.figures.space import space_map

    names = [f"<i>grp/{n}" for n in HTML] + ["plain.png"]
    groups = ["<i>grp"] * 3 + [""]
    nearest = [(names[(i + 1) % 4], 0.1 * i) for i in range(4)]
    fig = space_map(np.arange(8.0).reshape(4, 2), names, groups=groups, nearest=nearest, highlight=0)
    strings = _no_markup(fig)
    d = fig.to_dict()
    assert [t["name"] for t in d["data"]] == ["&lt;i&gt;grp", "images", "query"]
    texts = [t for tr in d["data"] for t in (tr.get("text") or [])]
    assert texts[0] == ('&lt;i&gt;grp/&lt;a href="https:x"&gt;link.png<br>nearest: &lt;i&gt;grp/&lt;b&gt;bold&lt;'
                        '/b&gt;.png (0.0000)')
    assert any("a &amp; b &amp;amp; c.png" in s for s in strings)


def test_image_strip_escapes_titles_and_hover():
    from lpips_explorer.figures.maps import png_data_uri
    from lpips_explorer.figures.space import image_strip

    src = png_data_uri(np.zeros((4, 4, 3)))
    fig = image_strip([src] * 3, ["query", "1 · 0.1000", "<b>t</b>"], hover=HTML)
    _no_markup(fig)
    d = fig.to_dict()
    assert [a["text"] for a in d["layout"]["annotations"]] == ["query", "1 · 0.1000", "&lt;b&gt;t&lt;/b&gt;"]
    assert [t["name"] for t in d["data"]] == [plotly_escape(h) for h in HTML]
    assert d["data"][0]["hovertemplate"] == '&lt;a href="https:x"&gt;link.png<extra></extra>'


def test_dataset_figures_escape_method_names_and_titles():
    from lpips_explorer.figures.datasets import distributions
    from lpips_explorer.figures.maps import map_overlay

    table = pd.DataFrame({"method": [HTML[0], HTML[0], HTML[1]], "error_kind": ["", "", ""], "mse": [0.1, 0.2, 0.3]})
    fig = distributions(table, ["mse"])
    _no_markup(fig)
    assert [t["name"] for t in fig.to_dict()["data"]] == [plotly_escape(HTML[0]), plotly_escape(HTML[1])]
    fig = map_overlay(np.zeros((8, 8, 3)), np.zeros((8, 8)), title=f"1. {HTML[1]} · {HTML[0]} · 0.1000")
    _no_markup(fig)
    assert fig.to_dict()["layout"]["title"]["text"].startswith("1. &lt;b&gt;bold&lt;/b&gt;.png · &lt;a href=")


def test_md_frame_escapes_table_text_for_st_table():
    from ui.text import md_escape, md_frame

    frame = pd.DataFrame({"method": [HTML[0], "A-blur"], f"mean {HTML[1]}": [1.0, 2.0], "n": [3, 4]})
    out = md_frame(frame)
    assert list(out.columns) == ["method", md_escape(f"mean {HTML[1]}"), "n"]
    assert list(out["method"]) == [md_escape(HTML[0]), md_escape("A-blur")] and "<" not in out["method"][0].replace("\\<", "")
    assert out["n"].tolist() == [3, 4] and out.iloc[:, 1].tolist() == [1.0, 2.0]
    assert list(md_frame(frame.set_index("method")).index) == [md_escape(HTML[0]), md_escape("A-blur")]
    assert list(frame["method"]) == [HTML[0], "A-blur"]  # a copy
