"""Score a dataset: a folder of ground truth against one or two methods' outputs, many metrics at once.

The data comes from the built-in demo set (:func:`lpips_explorer.demo_dataset.make_demo`: a blur and
a shift plus noise, which pixel metrics and LPIPS rank in opposite orders), a zip of folders
(unpacked by the hostile-safe :func:`lpips_core.datasets.archive.extract_zip`) or two sets of
uploaded files. Scoring is :func:`lpips_core.datasets.score_pairs` (pairs matched by name, one
network pass per image for the metrics that share it); A vs B is
:func:`lpips_core.datasets.methods.compare_methods`; "explain a reported number" is
:func:`lpips_core.datasets.explain.explain`. This file reads widgets and draws results.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

import ui
from lpips_core import WeightsUnavailable, metric_registry
from lpips_core.conventions import resize
from lpips_core.cells import frame_to_csv
from lpips_core.datasets import Scorer, match_folders, parse_spec, score_pairs
from lpips_core.datasets.archive import MAX_BYTES, ArchiveRefused, dataset_folders, extract_zip
from lpips_core.images import DEFAULT_MAX_PIXELS
from lpips_explorer.jobs import JobsBusy
from lpips_explorer.scratch import ScratchFull
from lpips_core.datasets.explain import explain
from lpips_core.datasets.loader import MISMATCH_POLICIES, decode_pair
from lpips_core.datasets.methods import compare_methods, same_ranking
from lpips_core.datasets.score import package_versions
from lpips_explorer.figures.maps import map_overlay
from ui import uploads
from ui.uploads import demo_root
from ui.uploads import replace_root as _replace_root

SOURCES = ("Built-in demo set", "A zip of folders", "Two sets of files")
DEFAULT_METRICS = ("mse", "psnr", "ssim", "lpips-alex")
OPTIONAL_METRICS = ("lpips-alex-0.1-baseline", "lpips-vgg", "stlpips-alex", "dists")
METRIC_OPTIONS = tuple(parse_spec(m).name for m in DEFAULT_METRICS + OPTIONAL_METRICS)
WORST = 10
NONE = "(none)"
RESULT, ZIP_ROOT, FILES_ROOT = "ds_result", "ds_zip_root", "ds_files_root"


# --------------------------------------------------------------------------- data sources
def _guess(dirs: list[Path], words: tuple[str, ...], default: int) -> int:
    for i, d in enumerate(dirs):
        if any(w in d.name.lower() for w in words):
            return i
    return min(default, len(dirs) - 1)


def folders_from_zip() -> dict | None:
    up = st.file_uploader("A zip with one folder of reference images and one or two folders of method outputs "
                          "(files matched by name)", type=["zip"], key="ds_zip")
    if up is None:
        st.info("Upload a zip, or choose the built-in demo set.")
        return None
    data = up.getvalue()
    try:
        root, allowance = _replace_root(ZIP_ROOT, hashlib.sha256(data).hexdigest(), "zip", MAX_BYTES,
                                        lambda folder, room: extract_zip(data, folder, max_bytes=room))
    except ArchiveRefused as exc:
        st.error(f"The zip was refused: {ui.md_escape(str(exc))}")
        return None
    except ScratchFull as exc:
        st.error(ui.md_escape(str(exc)))
        return None
    base, dirs = dataset_folders(root)
    if len(dirs) < 2:
        st.error(f"The zip needs at least two folders (reference and a method); it has {len(dirs)}.")
        return None
    names = [d.name for d in dirs]
    c1, c2, c3 = st.columns(3)
    ref = c1.selectbox("Reference folder", names, index=_guess(dirs, ("ref", "gt", "ground", "real"), 0),
                       key="ds_zip_ref")
    rest = [n for n in names if n != ref]
    a = c2.selectbox("Method A", rest, key="ds_zip_a")
    b = c3.selectbox("Method B", [NONE] + [n for n in rest if n != a], index=1 if len(rest) > 1 else 0,
                     key="ds_zip_b")
    methods = {a: base / a} | ({b: base / b} if b != NONE else {})
    return {"label": f"zip {up.name}", "reference": base / ref, "methods": methods}


def folders_from_files() -> dict | None:
    c1, c2 = st.columns(2)
    refs = c1.file_uploader("Reference images", type=ui.UPLOAD_TYPES, accept_multiple_files=True, key="ds_files_ref")
    tests = c2.file_uploader("Test images (same names)", type=ui.UPLOAD_TYPES, accept_multiple_files=True,
                             key="ds_files_test")
    if not refs or not tests:
        st.info("Upload both sets; files are paired by name without extension.")
        return None
    h = hashlib.sha256()
    for f in (*refs, *tests):
        h.update(f.name.encode("utf-8", "surrogatepass") + b"\0" + f.getvalue())
    size = sum(len(f.getvalue()) for f in (*refs, *tests))

    def write(root: Path, _room: int) -> None:
        for sub, files in (("reference", refs), ("test", tests)):
            (root / sub).mkdir()
            for f in files:
                name = Path(f.name.replace("\\", "/")).name  # never a path from the browser
                if (name and not name.startswith(".") and "\0" not in name and len(name.encode("utf-8", "replace")) <= 255
                        and not (root / sub / name).exists()):
                    (root / sub / name).write_bytes(f.getvalue())

    try:
        root, _ = _replace_root(FILES_ROOT, h.hexdigest(), "files", size, write)
    except ScratchFull as exc:
        st.error(ui.md_escape(str(exc)))
        return None
    return {"label": "uploaded files", "reference": root / "reference", "methods": {"test": root / "test"}}


def over_budget(dataset: dict) -> str | None:
    """Why an upload is too large to score here, or ``None`` (:func:`ui.uploads.over_budget` over its folders)."""
    key = st.session_state.get(ZIP_ROOT if dataset["label"].startswith("zip") else FILES_ROOT)
    return uploads.over_budget((dataset["reference"], *dataset["methods"].values()), key[0] if key else "",
                               "python -m lpips_core score REFERENCE_DIR TEST_DIR")


# --------------------------------------------------------------------------- scoring
@st.cache_resource(show_spinner="Loading the metrics' networks…", max_entries=8)
def get_scorer(names: tuple[str, ...], device: str) -> Scorer:
    scorer = Scorer(names, device=device)
    scorer.build_all()
    return scorer


def run_scoring(dataset: dict, names: tuple[str, ...], mismatch: str) -> dict:
    scorer = get_scorer(names, ui.device_name())
    bar = st.progress(0.0, text="Scoring…")
    methods = list(dataset["methods"].items())
    runs, discoveries = {}, {}
    for k, (label, folder) in enumerate(methods):
        disc = match_folders(dataset["reference"], folder)
        discoveries[label] = disc

        def step(done: int, total: int, k=k, label=label) -> None:
            frac = (k + (done / total if total else 1.0)) / len(methods)
            bar.progress(min(frac, 1.0), text=f"Scoring {label}: {done} of {total} pairs")

        runs[label] = score_pairs(disc, names, mismatch=mismatch, workers=0, scorer=scorer, progress=step,
                                  max_pixels=DEFAULT_MAX_PIXELS)
    bar.empty()
    return {"runs": runs, "discoveries": discoveries, "names": names, "mismatch": mismatch,
            "label": dataset["label"], "reference": str(dataset["reference"])}


def summary_frame(result: dict) -> pd.DataFrame:
    rows = []
    for label, run in result["runs"].items():
        for name, s in run.summary["metrics"].items():
            rows.append({"method": label, "metric": name, "n": s["n"], "mean": s["mean"], "std": s["std"],
                         "ci95 low": s["ci95"][0], "ci95 high": s["ci95"][1]})
    return pd.DataFrame(rows)


def pairs_frame(result: dict) -> pd.DataFrame:
    frames = []
    for label, run in result["runs"].items():
        df = pd.DataFrame(run.rows, columns=list(run.columns))
        df.insert(0, "method", label)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def distributions(df: pd.DataFrame, names: tuple[str, ...]) -> go.Figure:
    """One box (with every pair's point) per method, one panel per metric."""
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=list(names))
    methods = list(dict.fromkeys(df["method"]))
    for j, name in enumerate(names, start=1):
        for i, m in enumerate(methods):
            vals = df.loc[(df["method"] == m) & (df["error_kind"] == ""), name].astype(float)
            fig.add_trace(go.Box(y=vals[np.isfinite(vals)], name=m, boxpoints="all", jitter=0.4,
                                 legendgroup=m, showlegend=j == 1, marker_color=f"hsl({210 + 150 * i},60%,45%)"),
                          row=1, col=j)
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=40, b=10), boxmode="group")
    return fig


def map_spec(names: tuple[str, ...]):
    """The first selected learned metric that has spatial maps (``None`` if there is none)."""
    for n in names:
        spec = parse_spec(n)
        if spec.learned and metric_registry.METRICS[spec.metric].has_maps:
            return spec
    return None


def worst_maps(result: dict, spec, scorer: Scorer) -> list[tuple[dict, go.Figure]]:
    df = pairs_frame(result)
    df = df[df["error_kind"] == ""].sort_values(spec.name, ascending=False).head(WORST)
    model = scorer.model(spec)
    pairs = {(label, p.key): p for label, d in result["discoveries"].items() for p in d.pairs}
    out = []
    for _, r in df.iterrows():
        d = decode_pair(0, pairs[(r["method"], r["key"])], mismatch=result["mismatch"])
        opts = dict(convention=spec.convention, size=spec.size, grayscale=spec.grayscale, device=model.device)
        x = metric_registry.prepare_input(spec.metric, d.a[None], **opts)
        y = metric_registry.prepare_input(spec.metric, d.b[None], **opts)
        res = model.compare(x, y, spatial=True)
        m = res.spatial_map[0].cpu().numpy()
        img = d.b[None] if tuple(d.b.shape[-2:]) == m.shape else resize(d.b[None], m.shape)
        fig = map_overlay(img[0].permute(1, 2, 0).clamp(0, 1).numpy(), m, value_name="LPIPS term",
                          title=f"{r['method']} · {r['key']} · {float(res.total[0]):.4f}", height=300)
        out.append((r.to_dict(), fig))
    return out


# --------------------------------------------------------------------------- the page
st.title("Score a dataset")
st.markdown(
    "A folder of ground truth against one or two methods' outputs, paired by file name, under many metrics "
    "at once: the table a paper reports, with its spread, and the pairs that drive it."
)
source = st.radio("Dataset", SOURCES, key="ds_source", horizontal=True)
if source == SOURCES[0]:
    root = Path(demo_root())
    dataset = {"label": "built-in demo", "reference": root / "reference",
               "methods": {"A-blur": root / "A-blur", "B-shift-noise": root / "B-shift-noise"}}
    st.caption("Patches of the sample photos (reference), blurred (A) and shifted by 2 px plus noise (B).")
elif source == SOURCES[1]:
    dataset = folders_from_zip()
else:
    dataset = folders_from_files()

st.caption("This page scores with its own list of metrics below (the sidebar's backbone is not used here).")
c1, c2 = st.columns([3, 1])
names = tuple(c1.multiselect("Metrics", METRIC_OPTIONS, default=[parse_spec(m).name for m in DEFAULT_METRICS],
                             key="ds_metrics",
                             help="VGG, ST-LPIPS and DISTS are slower on a CPU: opt in when you need them."))
mismatch = c2.selectbox("Size mismatch", MISMATCH_POLICIES, key="ds_mismatch",
                        help="error: the pair becomes an error row; resize: the test image to the reference's "
                             "size; crop: both to the common centre.")
if dataset is None:
    st.stop()
if not names:
    st.warning("Choose at least one metric.")
    st.stop()

signature = (dataset["label"], str(dataset["reference"]), tuple(map(str, dataset["methods"].values())), names,
             mismatch)
if st.button("Score", type="primary", key="ds_score"):
    if source != SOURCES[0] and (why := over_budget(dataset)):
        st.error(why)
        st.stop()
    try:
        with ui.heavy_job("Scoring"):
            st.session_state[RESULT] = (signature, run_scoring(dataset, names, mismatch))
    except WeightsUnavailable as exc:
        st.error(ui.md_escape(str(exc), links=True))
        st.stop()
    except JobsBusy as exc:
        st.error(str(exc))
        st.stop()
stored = st.session_state.get(RESULT)
if stored is None:
    st.info("Press Score to score every pair.")
    st.stop()
if stored[0] != signature:
    st.info("The dataset or the settings changed: press Score again. The results below are the previous ones.")
result = stored[1]
names = result["names"]

# ---- summary and per-pair table
st.subheader("Summary")
for label, disc in result["discoveries"].items():
    rep = disc.report()
    run = result["runs"][label]
    st.caption(f"{label}: {rep['pairs']} pairs · {run.summary['skipped']} skipped "
               f"{run.summary['skipped_by_reason'] or ''} · unmatched: {rep['only_reference']} reference, "
               f"{rep['only_test']} method · duplicate names: {rep['duplicates']} · non-images: {rep['ignored']}")
st.dataframe(summary_frame(result), hide_index=True, key="ds_summary")
st.caption("std: sample standard deviation (ddof = 1); ci95: Student t interval of the mean.")

st.subheader("Every pair")
table = pairs_frame(result)
st.dataframe(table, hide_index=True, key="ds_pairs")
st.plotly_chart(distributions(table, names), key="ds_dist")

# ---- A vs B
if len(result["runs"]) == 2:
    (la, ra), (lb, rb) = result["runs"].items()
    st.subheader(f"{la} vs {lb}")
    comp = compare_methods(ra.rows, rb.rows, names, labels=(la, lb))
    st.dataframe(pd.DataFrame([{"metric": c["metric"], "n": c["n"], f"mean {la}": c["mean_a"],
                                f"mean {lb}": c["mean_b"], "mean difference (A − B)": c["diff"],
                                "ci95 low": c["ci95"][0], "ci95 high": c["ci95"][1],
                                "better": c["better"], "clear (CI excludes 0)": "yes" if c["clear"] else "no",
                                "direction": "higher is better" if c["higher_is_better"] else "lower is better"}
                               for c in comp]), hide_index=True, key="ds_versus")
    if same_ranking(comp):
        st.success(f"Every metric ranks the methods the same way ({comp[0]['better']} is better).")
    else:
        verdicts = ", ".join(f"{c['metric']} → {c['better']}" for c in comp)
        st.warning(f"The metrics disagree on which method is better: {verdicts}.")
    st.caption("Paired over the pairs both methods scored; difference interval: Student t (scipy.stats.t).")

# ---- worst pairs with their maps
spec = map_spec(names)
st.subheader(f"The {WORST} worst pairs" + (f" by {spec.name}" if spec else ""))
if spec is None:
    st.info("Add an LPIPS-like metric to see the worst pairs' spatial maps.")
else:
    if "maps" not in result:  # computed once per scoring, not on every rerun
        try:
            with ui.heavy_job("Drawing the worst pairs' maps"):
                result["maps"] = worst_maps(result, spec, get_scorer(names, ui.device_name()))
        except JobsBusy as exc:
            st.error(str(exc))
    shown = result.get("maps", [])
    cols = st.columns(2)
    for i, (row, fig) in enumerate(shown):
        cols[i % 2].plotly_chart(fig, key=f"ds_map_{i}")
    st.caption("Each map is the spatial LPIPS of the pair (the layer maps summed, over the test image); "
               "its mean is the pair's score.")

# ---- explain a reported number
st.subheader("Explain a reported number")
with st.form("ds_explain"):
    c1, c2, c3 = st.columns(3)
    reported = c1.number_input("Reported value", value=0.2, format="%.4f", key="ds_reported")
    written = c2.text_input("Metric as the paper wrote it (optional)", key="ds_written")
    target = c3.selectbox("Pairs of", list(result["discoveries"]), key="ds_explain_method")
    nets = st.multiselect("Backbones", list(ui.available_nets()), default=["alex"], key="ds_explain_nets")
    sizes = st.multiselect("Sizes", ["native", 64, 256], default=["native", 64], key="ds_explain_sizes")
    submitted = st.form_submit_button("Find the configuration", key="ds_explain_go")
if submitted:
    if not nets or not sizes:
        st.warning("Choose at least one backbone and one size.")
    else:
        try:
            with ui.heavy_job("Explaining"):
                bar = st.progress(0.0, text="Trying every configuration…")
                ex = explain(result["discoveries"][target], reported, name=written or None, nets=nets,
                             sizes=[None if s == "native" else s for s in sizes], mismatch=result["mismatch"],
                             workers=0,
                             progress=lambda d, t: bar.progress(d / t if t else 1.0, text=f"{d} of {t} pairs"))
                bar.empty()
            st.session_state["ds_explained"] = ex.to_json(top=15)
        except JobsBusy as exc:
            st.error(str(exc))
explained = st.session_state.get("ds_explained")
if explained:
    st.dataframe(pd.DataFrame(explained["candidates"]), hide_index=True, key="ds_explain_table")
    st.caption(f"Closest first, over {explained['pairs']} pairs; z: standard errors from {explained['reported']}. "
               "A match is meaningful only when few configurations hold the reported value.")

# ---- downloads
st.subheader("Downloads")
report = {"dataset": result["label"], "metrics": list(names), "mismatch": result["mismatch"],
          "methods": {label: run.to_json() for label, run in result["runs"].items()},
          "versions": package_versions()}
if len(result["runs"]) == 2:
    report["comparison"] = comp
d1, d2 = st.columns(2)
d1.download_button("Per-pair table (CSV)", frame_to_csv(table).encode(), "dataset_scores.csv", "text/csv",
                   key="ds_csv")
d2.download_button("Summary and configuration (JSON)", json.dumps(report, indent=2, default=str).encode(),
                   "dataset_scores.json", "application/json", key="ds_json")
