"""What the class study shows, as plain values: the triplet's HTML, links, and the texts and tables
around the results (no Streamlit; the page draws what these return).

The triplet is one HTML block (:func:`triplet_html`): the three 64 px PNGs scaled by the browser
to the column they are in, nearest neighbour (``image-rendering: pixelated``: every source pixel a
crisp block, never resampled smooth), copy 1, the reference and copy 2 side by side; in a column
narrower than :data:`NARROW_PX` (a phone) the reference goes on top and the two copies side by
side below it, so they can still be compared without scrolling. A CSS container query decides,
so the layout follows the column's width, not the window's. The patch size also follows the
window's height (``fit``): while answering, the three patches, their captions and the answer
buttons below them stay inside the window without scrolling, from a 360 × 640 phone to a projector.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import math
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import urlencode, urlsplit

from lpips_core.cells import neutralise, number
from lpips_core.spec import MetricSpec

__all__ = [
    "CHOICE_TEXT",
    "NARROW_PX",
    "judgements_csv",
    "judges_text",
    "lecturer_link",
    "local_only",
    "own_rows",
    "qr_svg_data_uri",
    "reveal_rows",
    "student_link",
    "triplet_html",
    "votes_text",
]

#: A stored choice in words (0: copy 1, 1: copy 2, 2: can't tell).
CHOICE_TEXT = {0: "1 is closer", 1: "2 is closer", 2: "can't tell"}
#: Below this column width (CSS px) the triplet is laid out for a phone.
NARROW_PX = 480
#: The largest side a patch is drawn at (CSS px): ``answer`` while judging, ``large`` in the results.
SIZES = {"answer": "min(360px, 40vh)", "large": "min(440px, 52vh)"}
#: The window height the student's page leaves the triplet while answering (CSS): the rest holds
#: the page's top margin, the progress line, the question, the buttons and the gaps between them.
ANSWER_FIT = "calc(100svh - 250px)"
#: … when a notice (an alert box, taller than the question it replaces) is shown above the triplet.
ANSWER_FIT_NOTICE = "calc(100svh - 320px)"

_CSS = """<style>
.lx-tri{container-type:inline-size;width:100%}
.lx-tri .lx-grid{display:grid;grid-template-columns:repeat(3,minmax(0,1fr));gap:12px;margin:0 auto;
  max-width:calc(3 * min(var(--lx-max), var(--lx-fit, 100vh) - 30px) + 24px)}
.lx-tri figure{margin:0;min-width:0}
.lx-tri img{display:block;width:100%;height:auto;aspect-ratio:1/1;box-sizing:border-box;
  border:1px solid rgba(128,128,128,.35);image-rendering:crisp-edges;image-rendering:pixelated}
.lx-tri figcaption{text-align:center;font-size:.95rem;line-height:1.3;margin-top:4px}
@container (max-width: NARROWpx){
  .lx-tri .lx-grid{grid-template-columns:repeat(2,minmax(0,1fr));
    max-width:calc(2 * min(var(--lx-max), (var(--lx-fit, 200vh) - 72px) / 2) + 12px)}
  .lx-tri .lx-ref{order:-1;grid-column:1 / span 2;justify-self:center;width:calc(50% - 6px)}
}
</style>""".replace("NARROW", str(NARROW_PX))


def _data_uri(png: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(bytes(png)).decode("ascii")


def triplet_html(ref: bytes, p0: bytes, p1: bytes, *, size: str = "answer", index: int | None = None,
                 labels: Sequence[str] = ("1", "Reference", "2"), draw: int | None = None,
                 fit: str | None = None) -> str:
    """The triplet as one HTML block: copy 1, the reference, copy 2 (each a PNG as a data URI).

    Args:
        ref, p0, p1: PNG bytes of the reference and the two copies.
        size: ``"answer"`` (while judging) or ``"large"`` (results): the largest side drawn.
        index: the triplet's index, kept as ``data-triplet`` on the block (tests and the load test
            read which triplet is shown).
        labels: the captions of copy 1, the reference and copy 2.
        draw: a number that changes with every drawing of the answer view, kept as ``data-draw``
            (the page's answer guard, :mod:`ui.study_client`, knows from it that the page has drawn again).
        fit: the height (CSS length) the block may take: patches shrink to keep it inside
            (:data:`ANSWER_FIT` while answering); ``None``: only ``size`` limits them.

    Each ``<img>`` carries ``data-patch`` = ``"1"``, ``"ref"`` or ``"2"``.
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {tuple(SIZES)}, got {size!r}")
    if len(labels) != 3:
        raise ValueError(f"labels must name copy 1, the reference and copy 2, got {labels!r}")
    figs = []
    for cls, patch, png, label in (("lx-a", "1", p0, labels[0]), ("lx-ref", "ref", ref, labels[1]),
                                   ("lx-b", "2", p1, labels[2])):
        alt = "the reference" if patch == "ref" else f"copy {patch}"
        figs.append(f'<figure class="{cls}"><img data-patch="{patch}" alt="{alt}" src="{_data_uri(png)}">'
                    f"<figcaption>{html.escape(label)}</figcaption></figure>")
    tag = "" if index is None else f' data-triplet="{int(index)}"'
    if draw is not None:
        tag += f' data-draw="{int(draw)}"'
    style = f"--lx-max:{SIZES[size]}"
    if fit is not None:  # 100svh (the height left when a phone's browser shows its bars), 100vh where unknown
        style += f";--lx-fit:{html.escape(fit.replace('svh', 'vh'))};--lx-fit:{html.escape(fit)}"
    return (f'{_CSS}<div class="lx-tri" style="{style}"{tag}><div class="lx-grid">'
            + "".join(figs) + "</div></div>")


# --------------------------------------------------------------------------- links
def student_link(app_url: str | None, code: str) -> str:
    """The link students open: ``<app>/?study=CODE`` (any page of the app with ``study=`` opens the
    study). ``app_url``: the app's root URL (with its base path, if any); relative when unknown."""
    return f"{(app_url or '').rstrip('/')}/?{urlencode({'study': code})}"


def lecturer_link(app_url: str | None, code: str, key: str) -> str:
    """The lecturer's link: ``<app>/judge_it_yourself?study=CODE&key=KEY``."""
    return f"{(app_url or '').rstrip('/')}/judge_it_yourself?{urlencode({'study': code, 'key': key})}"


def local_only(url: str) -> bool:
    """Whether ``url`` names this machine only (``localhost``, ``127.x``, ``::1``): students elsewhere cannot open it."""
    host = (urlsplit(url).hostname or "").lower()
    return host in ("localhost", "::1", "0.0.0.0") or host.startswith("127.")


def qr_svg_data_uri(text: str) -> str:
    """A QR code of ``text`` (error correction M, 2-module quiet zone) as an SVG data URI, to be
    scaled by the browser (crisp at any size, e.g. on a projector)."""
    import segno

    qr = segno.make(text, error="m", micro=False)
    return qr.svg_data_uri(scale=1, border=2, dark="#000", light="#fff")


# --------------------------------------------------------------------------- texts
def judges_text(n: int) -> str:
    """``"1 judge"``, ``"3 judges"``."""
    return f"{n} judge" + ("" if n == 1 else "s")


def votes_text(votes: Sequence[int]) -> str:
    """How the judges voted on a triplet, in words: ``votes`` = judges choosing copy 1, copy 2, can't tell.

    ``(0, 1, 0)`` → "The one judge chose copy 2."; ``(1, 2, 0)`` → "Of 3 judges, 2 chose copy 2 and
    1 chose copy 1."; ``(0, 4, 0)`` → "All 4 judges chose copy 2."
    """
    if len(votes) != 3 or any((not isinstance(v, int)) or v < 0 for v in votes):
        raise ValueError(f"votes must be three counts (copy 1, copy 2, can't tell), got {votes!r}")
    n = sum(votes)
    if n == 0:
        return "No judge has answered it yet."
    names = ("chose copy 1", "chose copy 2", "could not tell")
    parts = [(v, names[i]) for i, v in sorted(enumerate(votes), key=lambda iv: (-iv[1], iv[0])) if v]
    if n == 1:
        return f"The one judge {parts[0][1]}."
    if len(parts) == 1:
        return f"All {n} judges {parts[0][1]}."
    said = [f"{v} {what}" for v, what in parts]
    return f"Of {n} judges, " + (", ".join(said[:-1]) + " and " + said[-1]) + "."


def _fmt(x: float) -> str:
    """4 significant digits (:func:`~lpips_core.cells.number`, Python's exponent)."""
    return number(x, 4, significant=True, short_exponent=False)


def reveal_rows(distances: Mapping[str, tuple[float, float]], specs: Iterable[MetricSpec], choice: int) -> list[dict]:
    """What each metric said about one triplet, against the participant's ``choice``.

    Rows ``{metric, copy 1, copy 2, closer, agrees}``: the two values as text (4 significant
    digits), which copy the metric puts closer (``"1"``, ``"2"``, ``"tie"``) and ``"yes"``, ``"no"``
    or ``"—"`` (a tie, or "can't tell"); never an empty cell.
    """
    out = []
    for spec in specs:
        if spec.name not in distances:
            continue
        d0, d1 = distances[spec.name]
        a, b = (-d0, -d1) if spec.higher_is_better else (d0, d1)
        closer = 0 if a < b else 1 if b < a else -1
        agrees = "—" if choice == 2 or closer < 0 else ("yes" if closer == choice else "no")
        out.append({"metric": spec.label, "copy 1": _fmt(d0), "copy 2": _fmt(d1),
                    "closer": {0: "1", 1: "2", -1: "tie"}[closer], "agrees": agrees})
    return out


def own_rows(you: Mapping[str, Any] | None, klass: Mapping[str, Any] | None) -> list[dict]:
    """A participant's agreement with each metric beside the class's, for a table with no empty cell.

    Args:
        you: ``summarize(...)["class"]`` of the participant's own answers, or ``None``.
        klass: ``summarize(...)["class"]`` of the whole class, or ``None`` when it is not shown.

    Rows ``{metric, "agrees with you", "agrees with the class"}`` (the last only when ``klass`` is
    given), each a percentage; the human ceiling is a class figure only (one judge always agrees
    with themself).
    """
    if you is None:
        return []
    cls = {m["key"]: m for m in (klass or {}).get("metrics", [])}
    rows = []
    for m in you["metrics"]:
        row = {"metric": m["label"], "agrees with you": f"{m['score']:.0%}"}
        if klass is not None:
            c = cls.get(m["key"])
            row["agrees with the class"] = f"{c['score']:.0%}" if c is not None and math.isfinite(c["score"]) else "—"
        rows.append(row)
    return rows


def judgements_csv(code: str, judgements: Iterable[Any], families: Sequence[str]) -> str:
    """The per-answer CSV the lecturer downloads: ``study, participant, triplet (1-based), family,
    choice, answer, response_ms, time_utc``; an unknown response time is an empty field."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["study", "participant", "triplet", "family", "choice", "answer", "response_ms", "time_utc"])
    for j in judgements:  # every text cell neutralised, as in every CSV the project writes
        w.writerow([neutralise(str(code)), neutralise(str(j.session)), j.triplet + 1, neutralise(families[j.triplet]),
                    j.choice, CHOICE_TEXT[j.choice], "" if j.response_ms is None else j.response_ms,
                    j.created.isoformat()])
    return buf.getvalue()
