"""Everything a study's triplets need, computed once when the study is created.

Students are shown 8-bit PNGs, and the metrics are computed on exactly those pixels (the PNG
decoded back to ``[0, 1]``), so each metric judges what the class judged. The results are stored
with the study (:meth:`lpips_explorer.study.store.StudyStore.create_study`); answering a triplet
then computes nothing: it is one database write and a redraw.

Creating a study takes about a second: the triplets, their PNGs and the pixel metrics (MSE, PSNR,
SSIM). The learned metrics (LPIPS, ST-LPIPS, DISTS: far longer on a CPU) are computed
afterwards by :func:`start_metrics`, one background thread per server process taking one study at a
time, each metric stored as soon as it is computed, while the lecturer keeps their link and the
class joins: answering never needs them.
"""

from __future__ import annotations

import atexit
import dataclasses
import io
import logging
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from PIL import Image

from lpips_core.images import image_to_png_bytes
from lpips_core.spec import MetricSpec
from lpips_explorer.study import scoring
from lpips_explorer.study import triplets as T

__all__ = ["MetricsJob", "Prepared", "decode_png", "metrics_job", "prepare", "shown", "start_metrics"]
log = logging.getLogger("lpips_explorer.study")


@dataclasses.dataclass(frozen=True)
class Prepared:
    """One triplet ready to store: its recipe, pixel digest, the three PNGs and every metric's values.

    Attributes:
        recipe: the :class:`~lpips_explorer.study.triplets.Recipe`.
        digest: SHA-256 of the rendered (float) pixels, :meth:`Triplet.digest`.
        pngs: ``(reference, copy 1, copy 2)`` as 8-bit PNG bytes.
        distances: ``spec name → (value for copy 1, value for copy 2)`` on the PNGs' pixels.
    """

    recipe: T.Recipe
    digest: str
    pngs: tuple[bytes, bytes, bytes]
    distances: dict[str, tuple[float, float]]


@dataclasses.dataclass(frozen=True)
class _Shown:
    ref: np.ndarray
    p0: np.ndarray
    p1: np.ndarray


def decode_png(png: bytes) -> np.ndarray:
    """An 8-bit RGB PNG as ``(H, W, 3)`` float32 in ``[0, 1]`` (value / 255)."""
    with Image.open(io.BytesIO(png)) as im:
        return np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0


def shown(t: T.Triplet) -> tuple[tuple[bytes, bytes, bytes], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """A rendered triplet as students see it: the three PNGs and their pixels in ``[0, 1]``
    (``round(value * 255) / 255``, exactly what decoding the PNGs gives)."""
    pngs = tuple(image_to_png_bytes(np.clip(img, 0.0, 1.0)) for img in (t.ref, t.p0, t.p1))
    return pngs, tuple(decode_png(p) for p in pngs)


def prepare(
    recipes: Sequence[T.Recipe],
    specs: Sequence[MetricSpec],
    models: Mapping[MetricSpec, Any],
    *,
    uploads: T.Uploads = None,
    progress: Callable[[int, int], object] | None = None,
) -> list[Prepared]:
    """Render every triplet, encode its PNGs and compute every metric on the shown pixels.

    Args:
        recipes: the study's recipes, in order.
        specs: the metrics to compute (:func:`lpips_core.spec.standard_specs`).
        models: ``spec → model`` for the learned specs; one missing or ``None`` is left out.
        uploads: the bytes of any ``"upload:…"`` image the recipes use.
        progress: ``progress(done, total)`` after each triplet and each metric (``total``: the
            triplets plus the metrics computed).

    Returns:
        One :class:`Prepared` per recipe, in order.
    """
    recipes = list(recipes)
    usable = [s for s in specs if not s.learned or models.get(s) is not None]
    total = len(recipes) + len(usable)
    step = 0
    rendered = []
    for r in recipes:
        t = T.render(r, uploads=uploads)
        pngs, pixels = shown(t)
        rendered.append((t.digest(), pngs, _Shown(*pixels)))
        step += 1
        if progress is not None:
            progress(step, total)
    per_key: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    views = [s for _, _, s in rendered]
    for spec in usable:
        per_key.update(scoring.study_distances(views, [spec], models))
        step += 1
        if progress is not None:
            progress(step, total)
    out = []
    for i, (r, (dig, pngs, _)) in enumerate(zip(recipes, rendered)):
        dist = {k: (float(d0[i]), float(d1[i])) for k, (d0, d1) in per_key.items()}
        out.append(Prepared(r, dig, pngs, dist))
    return out


# --------------------------------------------------------------------------- the learned metrics, later
@dataclasses.dataclass
class MetricsJob:
    """A study's learned metrics being computed in the background (:func:`start_metrics`).

    ``done`` of ``total`` metrics stored so far, ``current`` the label of the one computing,
    ``failed`` the names of those that could not be computed (no weights, an error: in the log),
    ``finished`` once the thread is done.
    """

    key: str
    total: int
    labels: tuple[str, ...]
    done: int = 0
    current: str | None = None
    failed: list[str] = dataclasses.field(default_factory=list)
    finished: bool = False
    started: float = dataclasses.field(default_factory=time.monotonic)
    ended: float | None = None


_JOBS: dict[str, MetricsJob] = {}
_JOBS_LOCK = threading.Lock()
_COMPUTE = threading.Lock()  # one study's metrics at a time: the CPU is the students' too
_STOP = threading.Event()  # the process is exiting: no next metric (torch in a thread at exit aborts)
_THREADS: list[threading.Thread] = []


@atexit.register
def _stop_jobs(timeout: float = 30.0) -> None:
    """At exit: let a metric being computed finish (at most ``timeout`` s), start no other."""
    _STOP.set()
    deadline = time.monotonic() + timeout
    for t in list(_THREADS):
        t.join(max(0.0, deadline - time.monotonic()))


def metrics_job(key: str) -> MetricsJob | None:
    """The job started for ``key`` in this process (running or finished), if any."""
    with _JOBS_LOCK:
        return _JOBS.get(key)


def start_metrics(key: str, pngs: Sequence[tuple[bytes, bytes, bytes]], specs: Sequence[MetricSpec],
                  load: Callable[[MetricSpec], Any], save: Callable[[str, dict[int, tuple[float, float]]], object],
                  done: Callable[[], object] | None = None) -> MetricsJob:
    """Compute ``specs`` (learned metrics) on the shown ``pngs`` in a background thread, once per
    ``key`` and process; each metric is handed to ``save(spec name, {triplet index: (copy 1, copy 2)})``
    as soon as it is computed. ``load(spec)`` gives the model (``None``: left out, listed as failed).
    ``done()`` is called once every metric was tried. A second call with the same ``key`` returns
    the first call's job."""
    specs = [s for s in specs if s.learned]
    with _JOBS_LOCK:
        job = _JOBS.get(key)
        if job is not None:
            return job
        job = MetricsJob(key, len(specs), tuple(s.label for s in specs))
        _JOBS[key] = job

    def work() -> None:
        with _COMPUTE:
            views = None
            for spec in specs:
                if _STOP.is_set():
                    return
                job.current = spec.label
                try:
                    model = load(spec)
                    if model is None:
                        raise LookupError(f"{spec.name}: no model (its weights are not on this server)")
                    if views is None:
                        views = [_Shown(*(decode_png(p) for p in trio)) for trio in pngs]
                    (d0, d1), = scoring.study_distances(views, [spec], {spec: model}).values()
                    save(spec.name, {i: (float(a), float(b)) for i, (a, b) in enumerate(zip(d0, d1))})
                except Exception:  # noqa: BLE001 - one metric's failure leaves the others; the log has it
                    log.warning("study %s: %s could not be computed", key, spec.name, exc_info=True)
                    job.failed.append(spec.name)
                job.done += 1
            if done is not None:
                try:
                    done()
                except Exception:  # noqa: BLE001 - the next view of the study tries again
                    log.warning("study %s: its metrics could not be marked done", key, exc_info=True)
        job.current, job.finished, job.ended = None, True, time.monotonic()
        print(f"lpips-explorer: study metrics computed: {job.done - len(job.failed)} of {job.total} in "
              f"{job.ended - job.started:.1f} s", file=sys.stderr, flush=True)

    thread = threading.Thread(target=work, name=f"study-metrics-{key}", daemon=True)
    _THREADS.append(thread)
    thread.start()
    return job
