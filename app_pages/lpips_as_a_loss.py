"""LPIPS as a loss: what optimising an image under each metric does (why MSE blurs; fooling the metric)."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import pandas as pd
import streamlit as st

from lpips_core.caching import LRU, content_digest
from lpips_core.elpips import ELPIPS
from lpips_core.spec import parse_specs
from lpips_explorer import loss_lab
from lpips_explorer.figures.loss import enlarge, fooling_curves, fooling_ratios, loss_curves, sharpness_bars
from lpips_explorer.runtime.jobs import JobsBusy
from ui.loss import sample as _sample
from ui.models import device_name, get_models
from ui.pair import reference, sample_names
from ui.sessions import heavy_job
from ui.text import md_escape, size_text

BLUR_KEY, FOOL_KEY = "lal_blur", "lal_fool"
KEEP = 4  # results kept per experiment in this session
ELPIPS_LABEL = "ELPIPS · VGG16"  # E-LPIPS's transformations on LPIPS-VGG (the info box says what it is)
MSE_REACHED = 1e-2  # MSE's result within this of the mean of the copies (max per pixel): the answer is reached
#: The learned losses of "Why MSE blurs" (the fooling experiment attacks the two LPIPS ones).
LOSSES = parse_specs("lpips-alex,lpips-vgg,stlpips-alex,dists-vgg")


# --------------------------------------------------------------------------- helpers
def _stored(kind: str) -> LRU:
    """This session's last :data:`KEEP` results of an experiment, by their settings."""
    return st.session_state.setdefault(f"{kind}_results", LRU(KEEP))


def _store(kind: str, key: tuple, result) -> None:
    _stored(kind).put(key, result)


def _stop(kind: str) -> None:
    st.session_state[f"{kind}_stopped"] = True


def _clear_stop(kind: str) -> None:
    st.session_state[f"{kind}_stopped"] = False


def _run(kind: str, key: tuple, per_round: int, limit: float, experiment: Callable) -> None:
    """``experiment(progress)`` in one of the server's heavy-job slots (one experiment at a time,
    whoever asks), under a progress bar; its result is kept unless it was stopped."""
    try:
        with heavy_job("This run"):
            bar, report = _progress(kind, per_round, limit)
            result = experiment(report)
            bar.empty()
        if not result.cancelled:
            _store(kind, key, result)
    except JobsBusy as exc:
        st.error(str(exc))


def _run_buttons(kind: str) -> bool:
    """Run and Stop; Stop interrupts a running experiment (Streamlit reruns the page) and the
    progress callback also checks the flag it sets."""
    c1, c2, _ = st.columns([1, 1, 6])
    run = c1.button("Run", key=f"{kind}_run", type="primary", on_click=_clear_stop, args=(kind,))
    c2.button("Stop", key=f"{kind}_stop", on_click=_stop, args=(kind,))
    if st.session_state.get(f"{kind}_stopped") and not run:
        st.info("Stopped: that run was discarded. Press Run to start again.", icon=":material/stop_circle:")
    return run


def _progress(kind: str, per_round: int, limit: float):
    """A progress bar and its ``progress(done, total)`` callback (steps of every loss, in turn): the
    steps done and, once two rounds are, the time left at the pace measured after the first
    (:class:`~lpips_explorer.loss_lab.TimeLeft`; "stops at the limit" when that comes first);
    ``False`` once Stop was pressed."""
    bar = st.progress(0.0, text="Starting…")
    start = time.perf_counter()
    clock: list[loss_lab.TimeLeft] = []  # made at the first report, which gives the total

    def report(done: int, total: int) -> bool:
        if not clock:
            clock.append(loss_lab.TimeLeft(start, total, per_round=per_round, limit=limit))
        left = clock[0].text(done, time.perf_counter())
        text = f"Step {done} of {total} (every loss's steps, in turn)" + (f" · {left}" if left else "")
        bar.progress(done / total if total else 1.0, text=text)
        return not st.session_state.get(f"{kind}_stopped", False)
    return bar, report


def _caption(label: str, run) -> str:
    return f"{label} · {run.steps} steps"


def _gallery(panels: list[tuple[str, np.ndarray]]) -> None:
    """The images in a row that wraps, each enlarged to at least 192 px by whole-pixel repetition
    and shown at exactly that width (nearest neighbour: the browser does not smooth the blur away)."""
    with st.container(horizontal=True, gap="small"):
        for caption, img in panels:
            big = enlarge(np.clip(img, 0, 1))
            st.image(big, caption=caption, width=big.shape[1])


def _budget(result, what: str) -> None:
    """The experiment's budget in words: equal steps, or what the time limit (or Stop) left."""
    equal, text = loss_lab.budget_text(result, what)
    if equal:
        st.success(text, icon=":material/balance:")
    else:
        st.warning(text, icon=":material/timer_off:")


# --------------------------------------------------------------------------- page
def _reference_and_defaults() -> tuple[dict, np.ndarray]:
    """The caption that names the reference, the device and its defaults; returns the defaults
    (:func:`~lpips_explorer.loss_lab.defaults`) and the reference."""
    device = device_name()
    lab = loss_lab.defaults(device)
    ref, ref_name = reference()
    st.caption(f"Reference: {md_escape(ref_name)} (sidebar) · device: {device} · defaults for a "
               f"{'CPU' if device == 'cpu' else 'GPU'}: images and step counts sized so that each experiment "
               f"finishes within a minute on an idle 2-core CPU. A time limit ({lab['blur']['max_seconds']:g} s) is "
               "the safety stop: if a busy machine reaches it, every loss has taken the same number of steps and the "
               "result says how many.")
    return lab, ref


# ----------------------------------------------------------------- 1. why MSE blurs
def _why_mse_blurs(lab: dict, ref: np.ndarray) -> dict:
    """Why MSE training blurs: what is optimised, its settings, Run and the stored result; returns the
    learned losses' models by label (the fooling experiment attacks two of them)."""
    st.header("Why MSE training blurs")
    st.markdown(
        "**What is optimised.** One image, to be as close as possible *on average* to K copies of the "
        "reference shifted by up to ±s px — the situation of a network that must predict an edge whose "
        "exact position it cannot know. Every loss starts from the same blurred image and takes the "
        "**same number of Adam steps** (the losses step in turn, the learning rate falls to 0 on a "
        "schedule of the step number), so the comparison does not depend on how slow a network is.\n\n"
        "**What to look for.** Under MSE the answer is known in closed form: the mean of the copies, a "
        "blur. The optimiser reaches it (the gap is printed below). The deep-feature losses do not "
        "settle for the blur: they put high-frequency detail back — sometimes real edges, sometimes "
        "texture or artifacts that were never in the reference (LPIPS as a loss has strange minima). "
        "The sharpness chart makes that a number: the high-frequency energy (mean square of the "
        "Laplacian) of each result divided by the reference's."
    )

    models = {spec.label: m for spec, m in get_models(LOSSES).items() if m is not None}

    b = lab["blur"]
    size, copies, max_shift, steps, seconds, seed, chosen = _blur_settings(b, models)
    key = (content_digest(ref), int(size), int(copies), int(max_shift), int(steps), float(seconds), int(seed),
           tuple(chosen))
    if _run_buttons(BLUR_KEY):
        _run(BLUR_KEY, key, 1 + len(chosen), float(seconds), lambda report: loss_lab.mse_blur_experiment(
            ref, {k: models[k] for k in chosen}, size=int(size), copies=int(copies), max_shift=int(max_shift),
            steps=int(steps), lr=b["lr"], seed=int(seed), max_seconds=float(seconds), progress=report))

    blur = _stored(BLUR_KEY).get(key)
    if blur is None:
        st.info(f"Press **Run** to optimise: {int(steps)} Adam steps for every loss (time limit "
                f"{float(seconds):g} s).", icon=":material/play_arrow:")
    else:
        _blur_result(blur)
    return models


def _blur_settings(b: dict, models: dict) -> tuple:
    """The experiment's Settings expander, from the defaults ``b``; returns the working size, the
    copies K, the largest shift, the steps, the time limit, the seed and the chosen learned losses."""
    with st.expander("Settings", expanded=False):
        c1, c2, c3 = st.columns(3)
        size = c1.select_slider("Working size (px)", [64, 96, 128], value=b["size"], key="lal_blur_size")
        copies = c2.slider("Shifted copies K", 2, 16, b["copies"], key="lal_blur_copies")
        max_shift = c3.slider("Largest shift s (px)", 1, 8, b["max_shift"], key="lal_blur_shift")
        c4, c5, c6 = st.columns(3)
        steps = c4.number_input("Steps per loss", 1, 1000, b["steps"], key="lal_blur_steps",
                                help="Every loss takes this many Adam steps.")
        seconds = c5.number_input("Time limit, all losses (s)", 1.0, 600.0, float(b["max_seconds"]), 10.0,
                                  key="lal_blur_seconds",
                                  help="A safety stop. The losses step in turn, so if it is reached every loss has "
                                       "taken the same number of steps, and the page says how many.")
        seed = c6.number_input("Seed", 0, 10_000, 0, key="lal_blur_seed")
        chosen = st.multiselect("Learned losses (MSE always runs)", list(models), default=list(models),
                                key="lal_blur_losses")
    return size, copies, max_shift, steps, seconds, seed, chosen


def _blur_result(blur) -> None:
    """The experiment's result: its budget, the images, MSE's gap to the closed form, the table and the charts."""
    runs = blur.runs
    _budget(blur, "loss")
    panels = [("reference (unshifted)", blur.reference), ("start (blurred)", blur.start),
              (f"mean of the {len(blur.shifts)} copies", blur.mean)]
    panels += [(_caption(label, run), run.image) for label, run in runs.items()]
    _gallery(panels)
    mse = runs.get(loss_lab.MSE_LABEL)
    if mse is not None:
        verdict = ("the optimiser found the closed-form answer, a blur" if blur.mse_gap < MSE_REACHED else
                   "the optimiser has not reached the closed-form answer (a blur) in these steps")
        st.markdown(f"MSE's result differs from the mean of the copies by at most **{blur.mse_gap:.1e}** "
                    f"per pixel (0–1 scale): {verdict} (the mean's sharpness: {blur.mean_sharpness:.3g} of "
                    "the reference's).")
    st.dataframe(pd.DataFrame([
        {"loss": label, "steps": run.steps, "s / step": run.seconds_per_step,
         "first loss": run.losses[0] if run.losses else float("nan"),
         "last loss": run.losses[-1] if run.losses else float("nan"),
         "last ÷ first": run.losses[-1] / run.losses[0] if run.losses and run.losses[0] else float("nan"),
         "sharpness": run.sharpness}
        for label, run in runs.items()]), hide_index=True, key="lal_blur_table",
        column_config={c: st.column_config.NumberColumn(format="%.4g")
                       for c in ("s / step", "first loss", "last loss", "last ÷ first", "sharpness")})
    curves = {k: r.losses for k, r in runs.items() if r.losses}
    if curves:
        st.plotly_chart(loss_curves(curves), key="lal_blur_curves")
    st.plotly_chart(sharpness_bars({"mean of the copies": blur.mean_sharpness,
                                    **{k: r.sharpness for k, r in runs.items()}}), key="lal_blur_sharpness")
    side = blur.settings["size"]
    st.caption(f"Images of {size_text(side, side, labelled=True)}, shown enlarged by whole pixels · "
               "shifts (dy, dx): "
               f"{blur.shifts} · seed {blur.settings['seed']} · Adam, learning rate from {blur.settings['lr']:g} "
               "to 0 on a cosine of the step number, image clamped to [0, 1] · each loss in its own input "
               "convention · sharpness: mean square of the Laplacian ÷ the reference's.")


# ----------------------------------------------------------------- 2. fooling
def _fooling_the_metric(lab: dict, ref: np.ndarray, models: dict) -> None:
    """Fooling the metric: what is optimised, what ELPIPS here is, its settings, Run and the stored result."""
    st.header("Fooling the metric")
    st.markdown(
        "**What is optimised.** Starting from the reference (the *source*), the image walks toward "
        "another photo (the *target*) while the metric must keep rating it within ε of the source: "
        "projected steps slide along the boundary d = ε. Every metric takes the **same number of "
        "steps** (in turn, the step size falling on a schedule of the step number). The result is "
        "checked once more at the end (and pulled back toward the source if needed).\n\n"
        "**What to look for.** How far the image got in pixels (RMS distance ÷ ε) while the metric "
        "still called it nearly identical. Kettunen, Härkönen and Lehtinen (2019, §3.1, 30 OpenImages "
        "images) reached **16.2 ± 0.8 × ε** for LPIPS-VGG (15.2 ± 0.7 for LPIPS-SqueezeNet) and only "
        "**3.0 ± 0.2 × ε** for their E-LPIPS, with a far longer attack and their own ℓ2 scale: compare "
        "the order of the metrics here, not the absolute numbers."
    )
    st.info(
        "**ELPIPS here is not the published E-LPIPS model.** It applies E-LPIPS's random "
        "transformations (translations, flips, axis swaps, colour-channel permutations, colour "
        "scaling, downscaling) to both images and averages LPIPS-VGG (v0.1, lin) over them. The "
        "published E-LPIPS also changes the network (average pooling, dropout, weights on every layer) "
        "and has its own weights, which this app does not ship. The attack sees one random "
        "transformation per step; the final check averages several with a fixed seed.",
        icon=":material/info:")

    f = lab["fooling"]
    vgg = models.get("LPIPS · VGG16")
    fool_models = {"LPIPS · VGG16": vgg, "LPIPS · AlexNet": models.get("LPIPS · AlexNet")}
    if vgg is not None:
        fool_models[ELPIPS_LABEL] = "elpips"
    fool_models = {k: m for k, m in fool_models.items() if m is not None}
    target_name, eps, fsize, fsteps, fseconds, fseed, fchosen = _fool_settings(f, fool_models)
    target = _sample(target_name, 256)
    fkey = (content_digest(ref), target_name, float(eps), int(fsize), int(fsteps), float(fseconds), int(fseed),
            tuple(fchosen))
    if _run_buttons(FOOL_KEY):
        def attack(report):
            chosen_models = {k: ELPIPS(vgg, seed=int(fseed)) if fool_models[k] == "elpips" else fool_models[k]
                             for k in fchosen}
            return loss_lab.fooling_experiment(
                ref, target, chosen_models, eps=float(eps), size=int(fsize), steps=int(fsteps),
                step_size=f["step_size"], check_samples=f["check_samples"], seed=int(fseed),
                max_seconds=float(fseconds), progress=report)

        _run(FOOL_KEY, fkey, max(1, len(fchosen)), float(fseconds), attack)

    fool = _stored(FOOL_KEY).get(fkey)
    if fool is None:
        st.info(f"Press **Run** to attack: {int(fsteps)} steps for every metric (time limit {float(fseconds):g} s).",
                icon=":material/play_arrow:")
    else:
        _fool_result(fool, target_name)


def _fool_settings(f: dict, fool_models: dict) -> tuple:
    """The attack's Settings expander, from the defaults ``f``; returns the target photo's name, ε, the
    working size, the steps, the time limit, the seed and the chosen metrics."""
    names = sample_names()
    with st.expander("Settings", expanded=False):
        c1, c2, c3 = st.columns(3)
        target_name = c1.selectbox("Target photo", names, index=names.index("coffee") if "coffee" in names else 0,
                                   key="lal_fool_target")
        eps = c2.select_slider("ε (allowed distance to the source)", [0.01, 0.02, 0.05, 0.1, 0.2], value=f["eps"],
                               key="lal_fool_eps")
        fsize = c3.select_slider("Working size (px)", [48, 64, 96, 128], value=f["size"], key="lal_fool_size")
        c4, c5, c6 = st.columns(3)
        fsteps = c4.number_input("Steps per metric", 1, 2000, f["steps"], key="lal_fool_steps",
                                 help="Every metric takes this many steps.")
        fseconds = c5.number_input("Time limit, all metrics (s)", 1.0, 600.0, float(f["max_seconds"]), 10.0,
                                   key="lal_fool_seconds",
                                   help="A safety stop. The metrics step in turn, so if it is reached every metric "
                                        "has taken the same number of steps, and the page says how many.")
        fseed = c6.number_input("Seed", 0, 10_000, 0, key="lal_fool_seed")
        fchosen = st.multiselect("Metrics", list(fool_models), default=list(fool_models), key="lal_fool_metrics")
    return target_name, eps, fsize, fsteps, fseconds, fseed, fchosen


def _fool_result(fool, target_name: str) -> None:
    """The attack's result: its budget, the images, the table and the charts."""
    _budget(fool, "metric")
    cut = [label for label, run in fool.runs.items() if run.check_cut]
    if cut:
        st.warning(f"The time limit cut the final check of {', '.join(cut)} short: its image was pulled back "
                   "toward the source further than needed, so its distance reached is an underestimate.",
                   icon=":material/timer_off:")
    panels = [("source (the reference)", fool.source), (f"target: {target_name}", fool.target)]
    panels += [(f"{label}: {run.ratio:.2f} × ε away, d = {run.distance:.3f}", run.image)
               for label, run in fool.runs.items()]
    _gallery(panels)
    st.dataframe(pd.DataFrame([
        {"metric": label, "steps": run.steps, "RMS to source": run.l2, "÷ ε": run.ratio, "metric's d": run.distance,
         "± (s.e.)": run.distance_stderr, "pulled back to": run.pullback}
        for label, run in fool.runs.items()]), hide_index=True, key="lal_fool_table",
        column_config={c: st.column_config.NumberColumn(format="%.4g")
                       for c in ("RMS to source", "÷ ε", "metric's d", "± (s.e.)", "pulled back to")})
    published = {"LPIPS-VGG (paper)": loss_lab.PUBLISHED_FOOLING["LPIPS-VGG"],
                 "E-LPIPS (paper)": loss_lab.PUBLISHED_FOOLING["E-LPIPS"]}
    st.plotly_chart(fooling_ratios({k: r.ratio for k, r in fool.runs.items()}, published), key="lal_fool_ratios")
    if any(r.distances for r in fool.runs.values()):
        st.plotly_chart(fooling_curves({k: (r.distances, r.l2s) for k, r in fool.runs.items()}, fool.eps),
                        key="lal_fool_curves")
    fside = fool.settings["size"]
    st.caption(f"Source to target: RMS {fool.source_to_target:.3f} · ε = {fool.eps:g} · images of "
               f"{size_text(fside, fside, labelled=True)}, shown enlarged by whole pixels · "
               f"seed {fool.settings['seed']} · "
               "step size on a cosine of the step number · RMS distance on the 0–1 pixel scale.")


def main() -> None:
    """The page, top to bottom."""
    st.title("LPIPS as a loss")
    st.markdown(
        "Half of LPIPS's users never read a score: they train with it. Here an image is optimised "
        "directly under each loss (no network is trained), small and fast enough to watch. "
        "Every number below comes from the run you see; the runs are seeded."
    )
    lab, ref = _reference_and_defaults()
    models = _why_mse_blurs(lab, ref)
    _fooling_the_metric(lab, ref, models)


main()
