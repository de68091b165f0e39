"""What the "Score a dataset" page shows, computed without Streamlit: its tables, how a paper's
metric name is read, and each folder's diversity.

- :func:`summary_frame`, :func:`pairs_frame`, :func:`versus_frame`: the page's tables from the
  runs of :func:`lpips_core.datasets.score_pairs` (metrics named by
  :attr:`~lpips_core.spec.MetricSpec.label`, the spec name kept beside it).
- :func:`name_reading`: what the name a paper gives its metric says (backbone, version,
  lin/baseline: :func:`lpips_core.datasets.explain.parse_name`), in words, and the backbones to
  search by default.
- :func:`explain_frame`, :func:`search_text`: an :class:`~lpips_core.datasets.explain.Explanation`
  (its JSON) as a table that fits a laptop's page, and what was searched.
- :func:`explain_sizes`: the sizes the explain search offers (the images' own side among them).
- :func:`folder_diversity`: the mean distance over all pairs of each folder's images with its
  interval over images, through the embedding (:mod:`lpips_core.space`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Sequence

import pandas as pd

from lpips_core.datasets.explain import describe_hints, parse_name
from lpips_core.spec import NET_LABELS, parse_spec

__all__ = ["NameReading", "explain_frame", "explain_sizes", "folder_diversity", "name_reading", "pairs_frame", "search_text",
           "summary_frame", "versus_frame"]


def summary_frame(runs: Mapping) -> pd.DataFrame:
    """One row per method and metric: ``method``, ``metric`` (its label), ``spec`` (its name, the
    tables' column), ``n``, ``mean``, ``std``, ``95% CI low``, ``95% CI high``.

    Args:
        runs: ``label → ScoreResult`` (anything with a ``summary`` as :func:`~lpips_core.datasets.summarize` gives).
    """
    rows = []
    for label, run in runs.items():
        for name, s in run.summary["metrics"].items():
            rows.append({"method": label, "metric": parse_spec(name).label, "spec": name, "n": s["n"],
                         "mean": s["mean"], "std": s["std"], "95% CI low": s["ci95"][0], "95% CI high": s["ci95"][1]})
    return pd.DataFrame(rows, columns=["method", "metric", "spec", "n", "mean", "std", "95% CI low", "95% CI high"])


def pairs_frame(runs: Mapping) -> pd.DataFrame:
    """Every run's rows, a ``method`` column first (the table the page shows and the CSV it offers)."""
    frames = []
    for label, run in runs.items():
        df = pd.DataFrame(run.rows, columns=list(run.columns))
        df.insert(0, "method", label)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def versus_frame(comparison: Sequence[dict], labels: tuple[str, str]) -> pd.DataFrame:
    """:func:`lpips_core.datasets.methods.compare_methods` as a table: ``metric`` (label), ``spec``,
    ``n``, both means, ``A − B`` (the paired difference), its ``95% CI low``/``high``, ``better``,
    ``clear`` (the interval excludes 0: ``"yes"``/``"no"``)."""
    a, b = labels
    return pd.DataFrame([{"metric": parse_spec(c["metric"]).label, "spec": c["metric"], "n": c["n"],
                          f"mean {a}": c["mean_a"], f"mean {b}": c["mean_b"], "A − B": c["diff"],
                          "95% CI low": c["ci95"][0], "95% CI high": c["ci95"][1], "better": c["better"],
                          "clear": "yes" if c["clear"] else "no"} for c in comparison])


@dataclass(frozen=True)
class NameReading:
    """What a metric's written name says, for the page.

    Attributes:
        nets: the backbones to search by default: those the name names and whose weights are
            here, else (the name names none) every available one.
        text: the reading in words (``"the name says: backbone VGG16 (from 'VGG')"``).
        missing: backbones the name names whose weights are not here.
        narrows: whether the name narrows the search (it names a backbone, version or head).
    """

    nets: list[str]
    text: str
    missing: list[str]
    narrows: bool


def name_reading(name: str | None, available: Sequence[str]) -> NameReading:
    """Read ``name`` (:func:`~lpips_core.datasets.explain.parse_name`) against the backbones whose
    weights are here (``available``)."""
    hints = parse_name(name)
    said = hints.get("nets", [])
    nets = [n for n in said if n in available] if said else list(available)
    missing = [n for n in said if n not in available]
    narrows = any(k in hints for k in ("nets", "version", "lin"))
    if not (name or "").strip():
        text = "No name given: every configuration is searched."
    elif not narrows:
        text = "The name says nothing about the backbone, version or lin weights: every configuration is searched."
    else:
        text = f"The name says: {describe_hints(hints)}."
    return NameReading(nets, text, missing, narrows)


def _labels(names: Sequence[str]) -> str:
    return "; ".join(parse_spec(n).label for n in names)


def explain_frame(explained: dict, *, top: int | None = None) -> pd.DataFrame:
    """The ranked configurations of an explanation (:meth:`Explanation.to_json`), closest first.

    Columns: ``★`` (the 95 % interval holds the reported value), ``configuration`` (its label),
    ``mean``, ``95% CI`` (text, ``"0.1012–0.1187"``), ``z`` (standard errors from the reported
    value), ``name`` (``✓`` where the row matches the written name; left out when no name was
    given), ``same values`` (the labels of the configurations that give the same numbers on this
    data, merged into this row; the long text last, so the short columns stay in view) and
    ``spec`` (the row's spec name, for ``--metrics``). When a row the race dropped is among them,
    ``scored`` says over how many pairs its numbers are (``"6 of 12 pairs (dropped)"``).
    """
    rows = []
    named = explained.get("name") is not None
    shown = explained["candidates"][:top]
    partial = any(not c.get("complete", True) for c in shown)
    for c in shown:
        lo, hi = c["ci95"]
        row = {"★": "★" if c["holds_reported"] else "", "configuration": c["label"], "mean": c["mean"],
               "95% CI": "—" if lo is None else f"{lo:.4f}–{hi:.4f}", "z": c["z"]}
        if named:
            row["name"] = "✓" if c["matches_name"] else ""
        if partial:
            row["scored"] = "" if c.get("complete", True) else f"{c['n']} of {explained['pairs']} pairs (dropped)"
        row["same values"] = _labels(c["same"][1:])
        row["spec"] = c["config"]
        rows.append(row)
    return pd.DataFrame(rows)


def explain_sizes(rows: Sequence[dict], base: Sequence[int] = (64, 224, 256)) -> list:
    """The sizes to offer the explain search: ``"native"``, then ``base`` with the references'
    common side added when every scored pair's reference is one square size (a paper that resized
    to the images' own size computed the native number: the search shows the two merged).

    Args:
        rows: a run's rows (``reference_size`` as ``"96x96"``; error rows are ignored).
        base: the usual sides (ascending).
    """
    sizes = {r["reference_size"] for r in rows if not r.get("error_kind") and r.get("reference_size")}
    sides = set(base)
    if len(sizes) == 1:
        h, _, w = next(iter(sizes)).partition("x")
        if h.isdigit() and h == w:
            sides.add(int(h))
    return ["native", *sorted(sides)]


def search_text(explained: dict) -> str:
    """What an explanation searched, for people: ``"AlexNet, VGG16 × v0.1, v0.0 × lin, baseline ×
    3 input ranges × colour, gray × native, 64, 256 px: 144 configurations, 96 rows (the others
    give the same values here)"``.

    Args:
        explained: :meth:`Explanation.to_json` with every candidate (``top=None``).
    """
    s = explained["searched"]
    nets = ", ".join(NET_LABELS.get(n, n) for n in s["nets"])
    heads = ", ".join("lin" if x else "baseline" for x in s["lin"])
    colour = ", ".join("gray" if g else "colour" for g in s["grayscale"])
    sizes = ", ".join(s["sizes"])
    ranges = len(s["conventions"])
    total = len(s["nets"]) * len(s["versions"]) * len(s["lin"]) * ranges * len(s["grayscale"]) * len(s["sizes"])
    rows = len(explained["candidates"])
    merged = f", {rows} rows (the others give the same values here)" if rows < total else ""
    return (f"{nets} × v{', v'.join(s['versions'])} × {heads} × {ranges} input range{'s' if ranges > 1 else ''} "
            f"× {colour} × {sizes} px: {total} configurations{merged}")


def folder_diversity(model, spec, folders: Mapping[str, str | os.PathLike[str]], *, level: float = 0.95,
                     memory_budget: int = 256 << 20) -> pd.DataFrame:
    """Each folder's diversity: the mean distance over all pairs of its images under ``spec``,
    with the jackknife interval over images (pairs that share an image are not independent:
    :func:`lpips_core.space.diversity`), one forward pass per image.

    Args:
        model: the spec's model (an LPIPS-like one: :func:`lpips_core.space.check_euclidean`).
        spec: a spec with an embedding (:attr:`~lpips_core.spec.MetricSpec.euclidean`).
        folders: ``label → folder`` (every image in it, recursively).

    Returns:
        Columns ``folder``, ``images``, ``diversity``, ``95% CI low``, ``95% CI high`` and
        ``note`` (why a folder has no value: e.g. images of several sizes, fewer than 2 images).

    Raises:
        ValueError: ``spec`` has no embedding. TypeError: see :func:`lpips_core.space.check_euclidean`.
    """
    from lpips_core import space

    spec = parse_spec(spec)
    if not spec.euclidean:
        raise ValueError(f"{spec.label} is not a distance between embeddings: its diversity needs every pair scored")
    rows = []
    for label, folder in folders.items():
        row = {"folder": label, "images": None, "diversity": None, "95% CI low": None, "95% CI high": None,
               "note": ""}
        try:
            emb = space.embed(model, folder, spec=spec, memory_budget=memory_budget)
            row["images"] = len(emb)
            s = space.diversity(emb, memory_budget=memory_budget, level=level)
        except ValueError as exc:
            row["note"] = " ".join(str(exc).split())
        else:
            row.update({"diversity": s["mean"], "95% CI low": s["ci95"][0], "95% CI high": s["ci95"][1]})
        rows.append(row)
    return pd.DataFrame(rows)
