"""LPIPS space: a set of images embedded once, mapped in the plane, with its diversity and neighbours.

The set is the built-in demo set (:func:`lpips_explorer.demo_dataset.make_demo`: patches, their
blurs and shifted noisy copies) or a zip of images (unpacked by the hostile-safe
:func:`lpips_core.datasets.archive.extract_zip`, as on "Score a dataset"). Everything comes from
:func:`lpips_explorer.space_view.analyse_set` (one forward pass per image, the Gram matrix, MDS)
under the sidebar's LPIPS configuration; figures from :mod:`lpips_explorer.figures.space` and
:func:`lpips_explorer.figures.maps.map_overlay`. This file reads widgets and draws results.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import streamlit as st

from lpips_core.datasets.archive import dataset_folders
from lpips_core.spec import MetricSpec
from lpips_explorer.figures.maps import map_overlay
from lpips_explorer.figures.space import diversity_scale, image_strip, space_map
from lpips_explorer.runtime.jobs import JobsBusy
from lpips_explorer.space_view import group_diversity
from ui import uploads
from ui.diversity import reference_points
from ui.models import get_model, sidebar_spec
from ui.sessions import heavy_job
from ui.space import MAX_K, view
from ui.text import distance_text, md_escape, size_text
from ui.uploads import demo_root, over_budget

SOURCES = ("Built-in demo set", "A zip of images")
SIZES = ("native", 64, 128, 256)
ZIP_ROOT = "sp_zip_root"


def folder_from_zip() -> Path | None:
    up = st.file_uploader("A zip of images (any folders inside; every image is one point)", type=["zip"],
                          key="sp_zip")
    if up is None:
        st.info("Upload a zip of images, or choose the built-in demo set.")
        return None
    data = up.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    unpacked = uploads.unpack_zip(ZIP_ROOT, data)
    if unpacked is None:
        return None
    root = unpacked[0]
    too_big = over_budget([root], digest, "python -m lpips_core diversity DIR")
    if too_big:
        st.error(md_escape(too_big))
        return None
    return dataset_folders(root)[0]  # inside a single top-level folder, names start below it


def pick_query(names: list[str]) -> None:
    """A click on the map makes that image the query (the selectbox below follows)."""
    event = st.session_state.get("sp_map")
    points = (event or {}).get("selection", {}).get("points", []) if isinstance(event, dict) else \
        getattr(getattr(event, "selection", None), "points", [])
    for p in points:
        row = p.get("customdata") if isinstance(p, dict) else None
        if isinstance(row, list):
            row = row[0] if row else None
        if isinstance(row, int) and 0 <= row < len(names):
            st.session_state["sp_query"] = names[row]
            return


def for_scale(v, spec, model, is_demo: bool) -> None:
    """The set's diversity among reference points under the same configuration: two sets made at
    its working size (:func:`ui.diversity.reference_points`), the demo set's reference patches
    (different photos) and the whole demo set: one bar each (HTML) and a caption that says what each is."""
    h, w = v.input_size
    refs = reference_points(spec.name, h, w, model)
    demo = v if is_demo else view(str(demo_root()), spec.name, model)  # cached for every visitor
    points = {**refs, "different photos": group_diversity(demo, "reference")}
    this = "this set: the demo set" if is_demo else "this set"
    if not is_demo:
        points["the demo set"] = demo.stats["mean"]
    points[this] = v.stats["mean"]
    st.html(diversity_scale(points, this=this))
    dh, dw = demo.input_size
    st.caption(f"For scale, under the same configuration. Made here at {size_text(w, h)}: six copies of one "
               "image, each with its own faint noise (σ = 0.01: near-duplicates, close to 0), and six independent "
               "noise images (LPIPS finds them alike: one texture). From the demo set "
               f"({size_text(dw, dh)}): its 12 reference patches, two from each of six photos (different "
               "photos), and all 36 images (the demo set).")


# --------------------------------------------------------------------------- the page
def _intro() -> None:
    """The page's title and what it shows."""
    st.title("LPIPS space")
    st.markdown(
        "A map of a set of images: each image is a point, close to the images LPIPS finds alike and far from "
        "those it finds different. Below it, how varied the set is (its diversity, beside sets for scale), each "
        "image's nearest images, and the set's closest and farthest pair."
    )


def _choices() -> tuple[str, int | str, int, Path]:
    """The set's source, working size and number of neighbours, then the set's folder (the demo set's, or
    an uploaded zip's); stops the page while there is none. Returns ``(source, size, k, folder)``."""
    c0, c1, c2 = st.columns([1.4, 1, 1])
    source = c0.radio("Images", SOURCES, key="sp_source")
    size = c1.selectbox("Working size", SIZES, key="sp_size",
                        format_func=lambda s: "native" if s == "native" else size_text(s, s),
                        help="LPIPS compares images of one size: choose one when the set's sizes differ.")
    k = c2.slider("Neighbours shown", 1, MAX_K, 5, key="sp_k")
    if source == SOURCES[0]:
        folder = Path(demo_root())
        st.caption("The demo set: 12 patches of the sample photos (reference/), each blurred (A-blur/) and shifted "
                   "by 2 px plus noise (B-shift-noise/).")
    else:
        folder = folder_from_zip()
    if folder is None:
        st.stop()
    return source, size, k, folder


def _embedded(folder: Path, source: str, spec: MetricSpec, model):
    """The set embedded and analysed (:func:`ui.space.view`); stops the page on an unreadable set or a
    busy server."""
    try:
        if source == SOURCES[0]:  # the demo set: small, and cached for every visitor
            v = view(str(folder), spec.name, model)
        else:  # an upload: one of the server's heavy-job slots
            with heavy_job("Embedding the set"):
                v = view(str(folder), spec.name, model)
    except ValueError as exc:
        st.error(md_escape(str(exc)))
        st.stop()
    except JobsBusy as exc:
        st.error(str(exc))
        st.stop()
    return v


def _the_number(v, spec: MetricSpec, model, source: str) -> None:
    """The set's diversity with its interval, and the sets for scale."""
    s = v.stats
    lo, hi = s["ci95"]
    m1, m2 = st.columns([1, 1.5])
    m1.metric("Diversity (mean LPIPS)", distance_text(s["mean"]))
    m2.metric("95 % interval", "—" if lo is None else f"{distance_text(lo)}–{distance_text(hi)}")
    st.caption(f"Over all {s['pairs']} pairs of {s['images']} images; {spec.name} at "
               f"{size_text(v.input_size[1], v.input_size[0], labelled=True)}. Interval: jackknife over images "
               "(leave one image out), since pairs that share an image are not independent draws."
               + (f" {len(v.skipped)} unreadable file(s) left out." if v.skipped else ""))
    for_scale(v, spec, model, source == SOURCES[0])


def _the_map(v) -> None:
    """The set in the plane, the query highlighted; a click on an image makes it the query."""
    names = v.names
    nearest = [(names[int(r[0])], float(dv[0])) for r, dv in zip(v.nn_index, v.nn_distance)]
    if st.session_state.get("sp_query") not in names:
        st.session_state["sp_query"] = names[0]
    query = names.index(st.session_state["sp_query"])
    st.subheader("The map")
    st.plotly_chart(space_map(v.xy, names, thumbnails=v.thumbs, groups=v.groups, nearest=nearest, highlight=query),
                    key="sp_map", on_select=lambda: pick_query(names), selection_mode="points")
    st.caption("Metric MDS (scikit-learn) of √LPIPS, the Euclidean distance between embeddings: close images lie "
               "close. Where thumbnails would cover each other they are moved apart, and a thin line leads from a "
               "moved one to its point. Hover a thumbnail for its name and nearest image; click one to make it the "
               "query.")


def _nearest_images(v, k: int) -> None:
    """The query's selectbox and its ``k`` nearest images, nearest first."""
    names = v.names
    st.subheader("Nearest images")
    st.selectbox("Query", names, key="sp_query")
    query = names.index(st.session_state["sp_query"])
    idx, dist = v.nn_index[query][:k], v.nn_distance[query][:k]
    st.plotly_chart(image_strip([v.thumbs[query]] + [v.thumbs[int(j)] for j in idx],
                                ["query"] + [f"{r} · {distance_text(dv)}" for r, dv in enumerate(dist, start=1)],
                                hover=[names[query]] + [names[int(j)] for j in idx], height=170), key="sp_strip")
    st.caption("Nearest first: " + " · ".join(f"{r}. {md_escape(names[int(j)])} ({distance_text(dv)})"
                                             for r, (j, dv) in enumerate(zip(idx, dist), 1))
               + ". Equal distances (identical images) go by name; the same search as "
               "`python -m lpips_core neighbours DIR DIR`.")


def _closest_and_farthest(v) -> None:
    """The set's closest and its farthest pair, each with its spatial map."""
    names = v.names
    st.subheader("Closest and farthest pairs")
    cols = st.columns(2)
    for col, label in zip(cols, ("closest", "farthest")):
        p = v.pairs[label]
        with col:
            st.markdown(f"**{label.capitalize()}**: {md_escape(names[p['i']])} and {md_escape(names[p['j']])}, "
                        f"LPIPS {distance_text(p['d'])}")
            st.image([p["a"], p["b"]], caption=[md_escape(names[p["i"]]), md_escape(names[p["j"]])], width=120)
            # the pair's one number, written by the same function as in the sentence above (the map's own
            # mean differs from it in the last digit: the layers' maps are upsampled to the image)
            st.plotly_chart(map_overlay(p["b"], p["map"], title=f"spatial map · LPIPS {distance_text(p['d'])}",
                                        height=280), key=f"sp_pair_{label}")


def main() -> None:
    """The page, top to bottom."""
    _intro()
    source, size, k, folder = _choices()
    spec = sidebar_spec().replace(size=None if size == "native" else size)
    model = get_model(spec)
    if model is None:
        st.stop()
    v = _embedded(folder, source, spec, model)
    _the_number(v, spec, model, source)
    _the_map(v)
    _nearest_images(v, k)
    _closest_and_farthest(v)


main()
