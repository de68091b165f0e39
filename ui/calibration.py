"""The Calibration lab's cached work: the mechanics table, the toy 2AFC's triplets and runs, and the
real LPIPS rows, each kept per server for its settings (``st.cache_data``; the test triplets are
a shared, never mutated ``st.cache_resource``).

The progress bars are created inside the cached functions: on a cache hit Streamlit replays them
in their final state ("computed in … s"), and no cached function draws on a block that was created
outside it (which the replay cannot do).
"""

from __future__ import annotations

import time

import streamlit as st

from lpips_core.spec import MetricSpec
from lpips_explorer import calibration as cal


@st.cache_data(show_spinner="Computing the mechanics…", max_entries=8)
def mechanics(seed: int, net_seed: int) -> cal.Mechanics:
    return cal.mechanics(seed=seed, net_seed=net_seed)


@st.cache_resource(show_spinner=False, max_entries=4)
def test_triplets(n: int, seed: int) -> cal.Triplets:
    # A resource (shared, never mutated): three (n, 64, 64, 3) float64 arrays need no copying.
    return cal.make_triplets(n, seed)


@st.cache_data(show_spinner=False, max_entries=8)
def run_2afc(net_seeds: tuple[int, ...], n: int, steps: int, lr: float, train_seed: int,
             test_seed: int) -> cal.TwoAFCResult:
    bar = st.progress(0.0, text="Toy 2AFC: starting…")
    t0 = time.perf_counter()
    result = cal.run_2afc(net_seeds=net_seeds, n_train=n, n_test=n, steps=steps, lr=lr, train_seed=train_seed,
                          test_seed=test_seed,
                          progress=lambda done, total: bar.progress(done / total, text=f"Toy 2AFC: {done / total:.0%}"))
    bar.progress(1.0, text=f"Toy 2AFC: computed in {time.perf_counter() - t0:.1f} s (kept for these settings)")
    return result


@st.cache_data(show_spinner=False, max_entries=8)
def real_scores(spec: str, device: str, n: int, test_seed: int, _model) -> cal.RealLPIPSResult:
    """:func:`lpips_explorer.calibration.real_lpips_2afc` with the app's cached model of ``spec`` (a
    name; ``_model`` is its model on ``device``, both part of the key)."""
    label = f"{MetricSpec.parse(spec).label}"
    bar = st.progress(0.0, text=f"{label}: drawing the test triplets…")
    t0 = time.perf_counter()
    test = test_triplets(n, test_seed)
    out = cal.real_lpips_2afc(test, {spec: _model}, progress=lambda done, total: bar.progress(
        done / total, text=f"{label}: {done:.0f} of {total:.0f} test triplets"))
    bar.progress(1.0, text=f"{label}: computed in {time.perf_counter() - t0:.1f} s (kept for these settings)")
    return next(iter(out.values()))
