"""Score a dataset: a folder of references (ground truth) against one or two methods' test images,
many metrics at once.

The data comes from the built-in demo set (:func:`lpips_explorer.demo_dataset.make_demo`: a blur and
a shift plus noise, which pixel metrics and LPIPS rank in opposite orders), a zip of folders
(unpacked by the hostile-safe :func:`lpips_core.datasets.archive.extract_zip`) or two sets of
uploaded files. Scoring is :func:`lpips_core.datasets.score_pairs` (pairs matched by name, one
network pass per image for the metrics that share it); A vs B is
:func:`lpips_core.datasets.methods.compare_methods`; the worst pairs' maps are
:func:`lpips_core.datasets.maps.worst_maps`; each folder's diversity and the tables come from
:mod:`lpips_explorer.dataset_view`; "explain a reported number" is
:func:`lpips_core.datasets.explain.explain`. This file reads widgets and draws results.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import streamlit as st

from lpips_core import WeightsUnavailable, metric_registry
from lpips_core.cells import frame_to_csv
from lpips_core.datasets import Scorer, match_folders, parse_spec, score_pairs
from lpips_core.datasets.archive import dataset_folders
from lpips_core.datasets.explain import explain, parse_name
from lpips_core.datasets.loader import MISMATCH_POLICIES
from lpips_core.datasets.maps import worst_maps
from lpips_core.datasets.methods import compare_methods, same_ranking
from lpips_core.datasets.score import package_versions
from lpips_core.images import DEFAULT_MAX_PIXELS
from lpips_core.spec import MetricSpec
from lpips_explorer import dataset_view as view
from lpips_explorer.figures.datasets import distributions
from lpips_explorer.figures.maps import map_overlay
from lpips_explorer.runtime.jobs import JobsBusy, server_scoring
from lpips_explorer.runtime.scratch import ScratchFull
from ui import uploads
from ui.choices import UPLOAD_TYPES
from ui.fragments import page_fragment
from ui.models import available_nets, device_name, get_model
from ui.sessions import heavy_job
from ui.text import NET_LABELS, md_escape, md_frame, significant, size_text
from ui.uploads import demo_root
from ui.uploads import replace_root as _replace_root

SOURCES = ("Built-in demo set", "A zip of folders", "Two sets of files")
DEFAULT_METRICS = ("mse", "psnr", "ssim", "lpips-alex")
OPTIONAL_METRICS = ("lpips-alex-0.1-baseline", "lpips-vgg", "stlpips-alex", "dists")
METRIC_OPTIONS = tuple(parse_spec(m).name for m in DEFAULT_METRICS + OPTIONAL_METRICS)
WORST = 10
TOP = 10
NONE = "(none)"
RESULT, ZIP_ROOT, FILES_ROOT, EXPLAINED = "ds_result", "ds_zip_root", "ds_files_root", "ds_explained"


# --------------------------------------------------------------------------- data sources
def _guess(dirs: list[Path], words: tuple[str, ...], default: int) -> int:
    for i, d in enumerate(dirs):
        if any(w in d.name.lower() for w in words):
            return i
    return min(default, len(dirs) - 1)


def folders_from_zip() -> dict | None:
    up = st.file_uploader("A zip with one folder of references (ground truth) and one or two folders of test "
                          "images (methods' outputs), files matched by name", type=["zip"], key="ds_zip")
    if up is None:
        st.info("Upload a zip, or choose the built-in demo set.")
        return None
    unpacked = uploads.unpack_zip(ZIP_ROOT, up.getvalue())
    if unpacked is None:
        return None
    root, allowance = unpacked
    base, dirs = dataset_folders(root)
    if len(dirs) < 2:
        st.error(f"The zip needs at least two folders (reference and a method); it has {len(dirs)}.")
        return None
    names = [d.name for d in dirs]
    c1, c2, c3 = st.columns(3)
    ref = c1.selectbox("Reference folder (ground truth)", names, index=_guess(dirs, ("ref", "gt", "ground", "real"), 0),
                       key="ds_zip_ref")
    rest = [n for n in names if n != ref]
    a = c2.selectbox("Method A (test images)", rest, key="ds_zip_a")
    b = c3.selectbox("Method B (test images)", [NONE] + [n for n in rest if n != a], index=1 if len(rest) > 1 else 0,
                     key="ds_zip_b")
    methods = {a: base / a} | ({b: base / b} if b != NONE else {})
    return {"label": f"zip {up.name}", "reference": base / ref, "methods": methods}


def folders_from_files() -> dict | None:
    c1, c2 = st.columns(2)
    refs = c1.file_uploader("References (ground truth)", type=UPLOAD_TYPES, accept_multiple_files=True,
                            key="ds_files_ref")
    tests = c2.file_uploader("Test images (a method's outputs, same names)", type=UPLOAD_TYPES,
                             accept_multiple_files=True, key="ds_files_test")
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
        st.error(md_escape(str(exc)))
        return None
    return {"label": "uploaded files", "reference": root / "reference", "methods": {"test": root / "test"}}


def over_budget(dataset: dict) -> str | None:
    """Why an upload is too large to score here, or ``None`` (:func:`ui.uploads.over_budget` over its folders)."""
    key = st.session_state.get(ZIP_ROOT if dataset["label"].startswith("zip") else FILES_ROOT)
    return uploads.over_budget((dataset["reference"], *dataset["methods"].values()), key[0] if key else "",
                               "python -m lpips_core score REFERENCE_DIR TEST_DIR")


# --------------------------------------------------------------------------- scoring
def model_of(spec):
    """The app's cached model of a learned ``spec`` (:func:`ui.get_model`, keyed by its model).

    Raises:
        WeightsUnavailable: its weights are not here (the getter has shown why and the fix).
    """
    model = get_model(spec)
    if model is None:
        raise WeightsUnavailable(f"{parse_spec(spec).label} cannot be loaded (see above)")
    return model


def scorer_for(names: tuple[str, ...]) -> Scorer:
    """A scorer of ``names`` on the app's cached models (one per metric, net and version, lin weights)."""
    specs = [s for s in map(parse_spec, names) if s.learned]
    return Scorer(names, device=device_name(),
                  models={Scorer.model_key(s): model_of(Scorer.model_key(s)) for s in specs})


def run_scoring(dataset: dict, names: tuple[str, ...], mismatch: str) -> dict:
    scorer = scorer_for(names)
    bar = st.progress(0.0, text="Scoring…")
    methods = list(dataset["methods"].items())
    runs, discoveries = {}, {}
    for k, (label, folder) in enumerate(methods):
        disc = match_folders(dataset["reference"], folder)
        discoveries[label] = disc

        def step(done: int, total: int, k=k, label=label) -> None:
            frac = (k + (done / total if total else 1.0)) / len(methods)
            bar.progress(min(frac, 1.0), text=f"Scoring {md_escape(label)}: {done} of {total} pairs")

        runs[label] = score_pairs(disc, names, mismatch=mismatch, scorer=scorer, progress=step,
                                  max_pixels=DEFAULT_MAX_PIXELS, **server_scoring())
    bar.empty()
    return {"runs": runs, "discoveries": discoveries, "names": names, "mismatch": mismatch,
            "label": dataset["label"],
            "folders": {"reference": str(dataset["reference"])} | {k: str(v) for k, v in dataset["methods"].items()}}


def map_spec(names: tuple[str, ...]):
    """The first selected learned metric that has spatial maps (``None`` if there is none)."""
    for n in names:
        spec = parse_spec(n)
        if spec.learned and metric_registry.METRICS[spec.metric].has_maps:
            return spec
    return None


def short(text: str, limit: int = 28) -> str:
    """A pair's key cut to fit a map's title (the full key is in the tables)."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def number(v) -> str:
    return significant(v, 4)


def table(frame, key: str, numbers=()) -> None:
    """``frame`` as a table that wraps its text (so it fits the page at any width), numbers to 4
    significant digits, in a container with ``key`` (the browser tests find it by that). ``st.table``
    reads cells and headers as Markdown: their text (folder names among it) goes through :func:`ui.md_frame`."""
    with st.container(key=key):
        st.table(md_frame(frame).style.format({md_escape(c): number for c in numbers}, na_rep="—"),
                 hide_index=True)


# --------------------------------------------------------------------------- explain
def _nets_follow_name() -> None:
    """The backbones field follows the written name: what it names (with weights here), else
    every available backbone; "search every configuration" selects them all."""
    available = available_nets()
    reading = view.name_reading(st.session_state.get("ds_written"), available)
    st.session_state["ds_explain_nets"] = list(available) if st.session_state.get("ds_explain_all") else reading.nets


def run_explain(disc, reported: float, written: str | None, search_all: bool, nets: list[str],
                sizes: list, mismatch: str) -> dict:
    """:func:`~lpips_core.datasets.explain.explain` on the app's cached models, with a progress bar."""
    hints = parse_name(written) if not search_all else {}
    versions = [hints["version"]] if "version" in hints else list(metric_registry.METRICS["lpips"].versions)
    models = {}
    for net in nets:
        for v in versions:
            spec = MetricSpec("lpips", net=net, version=v, lin=True)
            models[spec] = model_of(spec)
    bar = st.progress(0.0, text=f"Scoring {len(disc.pairs)} pairs under every configuration…")
    ex = explain(disc, reported, name=written or None, use_name=not search_all, nets=nets,
                 sizes=[None if s == "native" else s for s in sizes], mismatch=mismatch, models=models,
                 race=not search_all, exact_rows=TOP, **server_scoring(),
                 status=lambda p: bar.progress(p.done / p.total if p.total else 1.0, text=p.text))
    bar.empty()
    return ex.to_json()


def explain_section(result: dict, signature: tuple) -> None:
    st.subheader("Explain a reported number")
    st.markdown("Which LPIPS configuration gives a paper's number on these pairs? The dataset mean under every "
                "backbone, version, lin or baseline, input range, colour or gray and size, closest first.")
    available = available_nets()
    if "ds_explain_nets" not in st.session_state:
        _nets_follow_name()
    c1, c2, c3 = st.columns([1, 2, 1])
    reported = c1.number_input("Reported value", value=0.2, min_value=0.0, step=0.001, format="%.4f",
                               key="ds_reported")
    written = c2.text_input("Metric as the paper wrote it (optional)", key="ds_written", on_change=_nets_follow_name,
                            placeholder='e.g. "LPIPS (VGG)" or "LPIPS-Alex v0.0"')
    target = c3.selectbox("Pairs of", list(result["discoveries"]), key="ds_explain_method")
    reading = view.name_reading(written, available)
    search_all = st.checkbox("Search every configuration on every pair (the name only marks the rows that match "
                             "it; no configuration drops out)", key="ds_explain_all", on_change=_nets_follow_name)
    st.caption(reading.text + ("" if not reading.narrows else " Every configuration is searched; ✓ marks the rows "
                               "that match it." if search_all else " The search is narrowed to that (the "
                               "backbones below can be changed)."))
    if reading.missing:
        st.warning(f"The name says {', '.join(NET_LABELS[n] for n in reading.missing)}, whose weights are not "
                   "here: that backbone cannot be searched.")
    c4, c5 = st.columns(2)
    nets = c4.multiselect("Backbones", available, key="ds_explain_nets", format_func=NET_LABELS.get,
                          help="Default: what the name says, else every backbone whose weights are here. "
                               "VGG16 takes about ten times AlexNet's time on a CPU.")
    offered = view.explain_sizes(result["runs"][target].rows)
    sizes = c5.multiselect("Sizes", offered, default=[s for s in offered if s in ("native", 64, 256)],
                           key="ds_explain_sizes",
                           format_func=lambda s: s if s == "native" else size_text(s, s),
                           help="Both images resized to this square before the network; native: as they are.")
    if st.button("Find the configuration", type="primary", key="ds_explain_go"):
        if not nets or not sizes:
            st.warning("Choose at least one backbone and one size.")
        else:
            try:
                with heavy_job("Explaining"):
                    st.session_state[EXPLAINED] = ((signature, target), run_explain(
                        result["discoveries"][target], reported, written.strip() or None, search_all, nets, sizes,
                        result["mismatch"]))
            except (WeightsUnavailable, ValueError) as exc:
                st.error(md_escape(str(exc), links=True))
            except JobsBusy as exc:
                st.error(str(exc))
    stored = st.session_state.get(EXPLAINED)
    if not stored or stored[0] != (signature, target):
        return
    ex = stored[1]
    {"one": st.success, "several": st.warning, "none": st.error}[ex["verdict"]](md_escape(ex["sentence"]))
    st.caption(f"Reported {ex['reported']:g}" + (f" as “{md_escape(ex['name'])}”" if ex["name"] else "")
               + f", over {ex['pairs']} pairs of {md_escape(target)}. Searched "
               + md_escape(view.search_text(ex)) + ".")
    frame = view.explain_frame(ex, top=TOP)
    table(frame.drop(columns=["spec"]), "ds_explain_table", ("mean", "z"))
    st.caption("Closest first (the top 10). ★: the 95 % interval of the mean holds the reported value; z: standard "
               "errors (std/√n) from it; same values: configurations that give the same number for every pair "
               "here (e.g. 256 px on 256 px images and native), merged into the row"
               + ("; ✓: matches the written name." if ex["name"] else ".")
               + " A match means something only when few configurations hold the value.")
    race = ex.get("race") or {}
    if race.get("raced"):
        st.caption(f"Raced: {race['dropped']} of {race['configurations']} configurations dropped out as the pairs "
                   "came in (their running mean could not reach the value)"
                   + (f", {race['finished']} more were checked back in and finished" if race["finished"] else "")
                   + f"; {race['passes']} of {race['passes_full']} pair passes ran. The first {TOP} rows "
                   "and the verdict are the full search's; *Search every configuration on every pair* computes all.")
    if ex["unavailable"]:
        st.caption("Not searched: " + "; ".join(f"{NET_LABELS.get(k, k)} ({md_escape(v)})"
                                                for k, v in ex["unavailable"].items()))
    box = st.expander("Spec names (for --metrics)", key="ds_explain_specs", on_change="rerun")
    with box:
        if box.open:
            st.code("\n".join(" = ".join(c["same"]) for c in ex["candidates"][:TOP]), language=None)
    st.download_button("Every configuration (JSON)", json.dumps(ex, indent=1).encode(), "explain.json",
                       "application/json", key="ds_explain_json")


# --------------------------------------------------------------------------- the page
def _dataset() -> tuple[str, dict | None]:
    """The Dataset radio and the chosen source's folders: the demo set's, or a zip's or the uploaded
    files' (``None`` until there is one)."""
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
    return source, dataset


def _settings() -> tuple[tuple[str, ...], str]:
    """The metrics to score and the size-mismatch policy."""
    st.caption("This page scores with its own list of metrics below (the sidebar's backbone is not used here).")
    c1, c2 = st.columns([3, 1])
    names = tuple(c1.multiselect("Metrics", METRIC_OPTIONS, default=[parse_spec(m).name for m in DEFAULT_METRICS],
                                 key="ds_metrics", format_func=lambda n: parse_spec(n).label,
                                 help="VGG, ST-LPIPS and DISTS are slower on a CPU: opt in when you need them."))
    mismatch = c2.selectbox("Size mismatch", MISMATCH_POLICIES, key="ds_mismatch",
                            help="error: the pair becomes an error row; resize: each test image to its reference's "
                                 "size; crop: both to their common centre.")
    return names, mismatch


def _scored(source: str, dataset: dict | None, names: tuple[str, ...], mismatch: str) -> tuple[tuple, dict]:
    """The Score button and this session's result, as ``(its settings' signature, the result)``; the
    page stops here while there is no dataset, metric or result."""
    if dataset is None:
        st.stop()
    if not names:
        st.warning("Choose at least one metric.")
        st.stop()

    signature = (dataset["label"], str(dataset["reference"]), tuple(map(str, dataset["methods"].values())), names,
                 mismatch)
    if st.button("Score", type="primary", key="ds_score"):
        if source != SOURCES[0] and (why := over_budget(dataset)):
            st.error(md_escape(why))
            st.stop()
        try:
            with heavy_job("Scoring"):
                st.session_state[RESULT] = (signature, run_scoring(dataset, names, mismatch))
        except WeightsUnavailable as exc:
            st.error(md_escape(str(exc), links=True))
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
    return stored


def _summary(result: dict, names) -> None:
    """Each method's counts, then the summary table."""
    st.subheader("Summary")
    for label, disc in result["discoveries"].items():
        rep = disc.report()
        run = result["runs"][label]
        skipped = ", ".join(f"{v} {k}" for k, v in run.summary["skipped_by_reason"].items())
        st.caption(f"{md_escape(label)}: {rep['pairs']} pairs · {run.summary['skipped']} skipped"
                   + (f" ({skipped})" if skipped else "")
                   + f" · unmatched: {rep['only_reference']} reference, {rep['only_test']} test · duplicate names: "
                   f"{rep['duplicates']} · non-images: {rep['ignored']}")
    summary = view.summary_frame(result["runs"])
    table(summary.drop(columns=["spec"]), "ds_summary", ("mean", "std", "95% CI low", "95% CI high"))
    st.caption("std: sample standard deviation (ddof = 1); 95 % CI: Student t interval of the mean. The tables' "
               "columns: " + "; ".join(f"{md_escape(parse_spec(n).label)} = `{n}`" for n in names) + ".")


def _every_pair(result: dict, names):
    """The per-pair table and the metrics' distributions; returns the table (for the CSV)."""
    st.subheader("Every pair")
    pairs = view.pairs_frame(result["runs"])
    # The columns that matter first (which pair, then its numbers), the files and sizes after: a narrow
    # page scrolls the rest inside the grid. The CSV keeps the frame's own order.
    first = ["method", "key", *names]
    st.dataframe(pairs, hide_index=True, key="ds_pairs",
                 column_order=first + [c for c in pairs.columns if c not in first])
    st.plotly_chart(distributions(pairs, names), key="ds_dist")
    return pairs


def _versus(result: dict, names) -> list | None:
    """A vs B, when two methods were scored: the paired differences and whether the metrics agree;
    returns the comparison (``None`` for one method)."""
    if len(result["runs"]) != 2:
        return None
    (la, ra), (lb, rb) = result["runs"].items()
    st.subheader(f"{md_escape(la)} vs {md_escape(lb)}")
    comp = compare_methods(ra.rows, rb.rows, names, labels=(la, lb))
    table(view.versus_frame(comp, (la, lb)).drop(columns=["spec"]), "ds_versus",
          (f"mean {la}", f"mean {lb}", "A − B", "95% CI low", "95% CI high"))
    if same_ranking(comp):
        st.success(f"Every metric ranks the methods the same way ({md_escape(comp[0]['better'])} is better).")
    else:
        verdicts = ", ".join(f"{parse_spec(c['metric']).label} → {md_escape(c['better'])}" for c in comp)
        st.warning(f"The metrics disagree on which method is better: {verdicts}.")
    st.caption("A − B: the mean of the paired differences over the pairs both methods scored, with its Student t "
               "interval (scipy.stats.t); clear: the interval excludes 0. Lower is better for MSE, LPIPS, ST-LPIPS "
               "and DISTS, higher for PSNR and SSIM.")
    return comp


def _diversity(result: dict, names) -> None:
    """Each folder's diversity under the first LPIPS-like metric, in an expander (computed when opened)."""
    dspec = next((s for s in map(parse_spec, names) if s.euclidean), None)
    st.subheader("Diversity")
    st.page_link("app_pages/lpips_space.py", label="LPIPS space: a set's map, nearest images and diversity",
                 icon=":material/scatter_plot:")
    box = st.expander("Each folder's diversity" + (f" under {dspec.label}" if dspec else ""), key="ds_diversity",
                      on_change="rerun")
    with box:
        if box.open and dspec is None:
            st.info("Add an LPIPS or ST-LPIPS metric: its diversity comes from one embedding per image.")
        elif box.open:
            if "diversity" not in result:
                try:
                    with heavy_job("Measuring diversity"):
                        with st.spinner("One forward pass per image, then all pairs…"):
                            result["diversity"] = view.folder_diversity(model_of(dspec), dspec, result["folders"])
                except JobsBusy as exc:
                    st.error(str(exc))
                except (ValueError, TypeError, WeightsUnavailable) as exc:
                    st.error(md_escape(str(exc), links=True))
            if "diversity" in result:
                div = result["diversity"]
                table(div if div["note"].any() else div.drop(columns=["note"]), "ds_diversity_table",
                      ("diversity", "95% CI low", "95% CI high"))
                st.caption("The mean distance over all pairs of a folder's images (every image in it, paired or not), "
                           "with a 95 % interval from the jackknife over images: pairs that share an image are not "
                           "independent draws. A method whose outputs are far less diverse than the references "
                           "smooths them out; the same as "
                           f"`python -m lpips_core diversity DIR --metrics {dspec.name}`.")


def _worst_pairs(result: dict, names) -> None:
    """The :data:`WORST` worst pairs' spatial maps under the first metric that has them."""
    spec = map_spec(names)
    st.subheader(f"The {WORST} worst pairs" + (f" by {spec.label}" if spec else ""))
    if spec is None:
        st.info("Add an LPIPS-like metric to see the worst pairs' spatial maps.")
        return
    if "maps" not in result:  # computed once per scoring, not on every rerun
        try:
            with heavy_job("Drawing the worst pairs' maps"):
                found = worst_maps(model_of(spec), spec,
                                   {label: (result["discoveries"][label], run.rows)
                                    for label, run in result["runs"].items()}, k=WORST, mismatch=result["mismatch"])
                result["maps"] = [map_overlay(m.image, m.map, value_name=f"{spec.label} term", height=300,
                                              title=f"{i}. {m.label} · {short(m.key)} · {m.value:.4f}")
                                  for i, m in enumerate(found, 1)]
        except JobsBusy as exc:
            st.error(str(exc))
        except (ValueError, WeightsUnavailable) as exc:
            st.error(md_escape(str(exc), links=True))
    shown = result.get("maps", [])
    for i in range(0, len(shown), 2):  # row by row: reading order, also when the columns stack on a phone
        for j, (col, fig) in enumerate(zip(st.columns(2), shown[i:i + 2]), i):
            col.plotly_chart(fig, key=f"ds_map_{j}")
    st.caption("Worst first, in reading order (left to right, row by row). Each map is the pair's spatial LPIPS "
               "over its test image: the layers' per-position terms, upsampled to the image and summed (its mean "
               "is the pair's score, up to that upsampling).")


@page_fragment("Score a dataset")
def _explain(result: dict, signature: tuple) -> None:
    """Explain a reported number, as a fragment: its widgets rerun this part alone (with the last
    full run's result), and the tables and maps above are neither rebuilt nor re-sent."""
    explain_section(result, signature)


def _downloads(result: dict, names, pairs, comp: list | None) -> None:
    """The per-pair table as CSV; the summary and configuration as JSON."""
    st.subheader("Downloads")
    report = {"dataset": result["label"], "metrics": list(names), "mismatch": result["mismatch"],
              "methods": {label: run.to_json() for label, run in result["runs"].items()},
              "versions": package_versions()}
    if comp is not None:
        report["comparison"] = comp
    d1, d2 = st.columns(2)
    d1.download_button("Per-pair table (CSV)", frame_to_csv(pairs).encode(), "dataset_scores.csv", "text/csv",
                       key="ds_csv")
    d2.download_button("Summary and configuration (JSON)", json.dumps(report, indent=2, default=str).encode(),
                       "dataset_scores.json", "application/json", key="ds_json")


def main() -> None:
    """The page, top to bottom."""
    st.title("Score a dataset")
    st.markdown(
        "A folder of references (ground truth) against one or two methods' test images, paired by file name, under "
        "many metrics at once: the table a paper reports, with its spread, and the pairs that drive it."
    )
    source, dataset = _dataset()
    names, mismatch = _settings()
    signature, result = _scored(source, dataset, names, mismatch)
    names = result["names"]
    _summary(result, names)
    pairs = _every_pair(result, names)
    comp = _versus(result, names)
    _diversity(result, names)
    _worst_pairs(result, names)
    _explain(result, signature)
    _downloads(result, names, pairs, comp)


main()
