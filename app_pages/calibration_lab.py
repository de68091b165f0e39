"""Calibration lab: what LPIPS's learned "lin" channel weights buy, shown on random features."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from lpips_core.spec import MetricSpec
from lpips_explorer import calibration as cal
from lpips_explorer.figures import calibration as figs
from ui import state
from ui.calibration import mechanics, real_scores, run_2afc
from ui.models import availability, device_name, get_model, sidebar_spec
from ui.text import NET_LABELS, md_escape

# The reference example's settings are the defaults; the controls are bounded so one run stays
# within a few minutes on a CPU.
MAX_NETS = 8
TRIPLET_CHOICES = (50, 100, 200, 300, 400, 600, 800, 1000)
LR_CHOICES = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
CPU_REAL_DEFAULT = ("alex",)  # VGG16 over 3 × 600 patches takes ~2 min on a 2-core CPU
MECH_COLUMNS = {"mse": "MSE", "minus1_1": "[−1, 1] (correct)", "zero_one": "[0, 1] (unscaled)",
                "up2x": "2× upsampled"}


# --------------------------------------------------------------------------- text
def _settings_text(s: dict) -> str:
    seeds = s["net_seeds"]
    nets = f"seeds {seeds[0]}–{seeds[-1]}" if len(seeds) > 1 else f"seed {seeds[0]}"
    return (f"{len(seeds)} stand-in net(s) ({nets}), {s['n']} training + {s['n']} test triplets "
            f"(seeds {s['train_seed']}, {s['test_seed']}), {s['steps']} Adam steps at lr {s['lr']:g}")


# --------------------------------------------------------------------------- page
def _intro() -> None:
    """The page's title and what it shows."""
    st.title("Calibration lab")
    st.markdown(
        "LPIPS compares unit-normalised deep features channel by channel. The **lin** variant then weights each "
        "channel's squared difference with a non-negative number fitted to people's choices; the baseline weights "
        "every channel 1, which makes each position's term a cosine distance. This page shows what that fitting can "
        "and cannot do, on a stand-in you can rebuild at will: a **fixed, randomly initialised five-layer conv net** "
        "(strided first layer, two max-pools, a tap after every ReLU), whose features go through the same Eq. 1 code "
        "as the real metric. Its numbers are not LPIPS values; with the default seeds they are the worked example of "
        "the reference article on LPIPS, reproduced to its printed decimals."
    )


# ----------------------------------------------------------------- 1. mechanics
def _mechanics() -> None:
    """Section 1: the patch and network seeds, then the cosine check, the quadrant map and the four
    distortions fed three ways, on one patch."""
    st.header("1 · Mechanics on one patch")
    with st.expander("Patch and network seeds", expanded=False):
        c1, c2 = st.columns(2)
        mech_seed = int(c1.number_input("Patch seed (NumPy stream)", 0, 10_000, 0, key="cal_mech_seed"))
        mech_net = int(c2.number_input("Stand-in seed", 0, 10_000, 0, key="cal_mech_net"))
    mech = mechanics(mech_seed, mech_net)
    q = mech.quadrant

    st.subheader("Unweighted = cosine")
    st.markdown(
        "For unit vectors â, b̂ the sum over channels Σ(â − b̂)² equals 2 − 2 cos(a, b). Checked at every position of "
        "layer 3 for the patch against a noisy copy (σ = 0.1), the largest disagreement is float32 rounding:"
    )
    st.metric("max |Σ_c (â − b̂)² − (2 − 2 cos)| at layer 3", f"{mech.cosine_gap:.1e}")

    st.subheader("The spatial map finds local damage")
    c1, c2, c3 = st.columns([1, 1, 2])
    c1.image(mech.patch, caption="the 64×64 patch", clamp=True, width="stretch")
    c2.image(q.image, caption="noise σ = 0.15 in the top-left quadrant", clamp=True, width="stretch")
    with c3:
        st.plotly_chart(figs.quadrant_map(q), key="cal_quadrant_fig")
    m1, m2, m3 = st.columns(3)
    m1.metric("Scalar distance", f"{q.scalar:.4f}")
    m2.metric("Mean of the spatial map", f"{q.map_mean:.4f}")
    m3.metric("Share in the quadrant", f"{q.share:.2f}",
              help="The share of the spatial map that lies in the noised quadrant. The quadrant is a quarter of the "
                   "image: 0.25 would mean the map did not localise anything.")
    st.caption("Each layer's term map is bilinearly upsampled to 64×64 and the layers are summed; its mean is "
               "close to the scalar, which averages each layer at its own resolution.")

    st.subheader("Four distortions, three ways to feed them")
    st.dataframe(
        pd.DataFrame({name: {MECH_COLUMNS[k]: v for k, v in row.as_dict().items()}
                      for name, row in mech.rows.items()}).T,
        key="cal_mech_table",
        column_config={MECH_COLUMNS["mse"]: st.column_config.NumberColumn(format="%.5f"),
                       **{MECH_COLUMNS[k]: st.column_config.NumberColumn(format="%.4f")
                          for k in ("minus1_1", "zero_one", "up2x")}},
    )
    cols = st.columns(len(mech.distorted))
    for col, (name, img) in zip(cols, mech.distorted.items()):
        col.image(img, caption=name, clamp=True, width="stretch")
    st.markdown(
        "The same pairs fed in [0, 1] instead of [−1, 1] shrink by a different factor per distortion, so numbers "
        "from the two conventions cannot be mixed. Upsampling both images 2× roughly halves the noise distance "
        "(interpolation averages neighbouring noise samples) but not the shift's (one pixel becomes two): the image "
        "size is part of the metric's definition."
    )


# ----------------------------------------------------------------- 2. toy 2AFC
def _twoafc_intro() -> None:
    """Section 2's heading and what the experiment does."""
    st.header("2 · A toy 2AFC test with known answers")
    st.markdown(
        "Each triplet holds a patch, its **one-pixel shift** (the answer: people barely see it) and a copy with "
        "**Gaussian noise** or **8×8 block-DCT** artifacts whose MSE is 0.5 to 2 times the shift's, so plain L2 picks "
        "the right patch only about two times in three. Every stand-in is scored with all channel weights 1 and with "
        "**lin** weights fitted to the training triplets (a logistic link on d₀ − d₁, Adam, weights clamped at ≥ 0 "
        "after every step), both on held-out test triplets. Ties count one half."
    )


def _experiment_form(cfg: MetricSpec) -> None:
    """The experiment's form and the nets that cannot be scored here; a submitted form's settings are
    kept as the last run's (session state)."""
    status = {net: availability(cfg.replace(net=net)) for net in cal.REAL_NETS}
    real_options = [n for n in cal.REAL_NETS if status[n][0]]
    real_default = [n for n in (real_options if device_name() != "cpu" else CPU_REAL_DEFAULT) if n in real_options]

    with st.form("cal_form"):
        c1, c2, c3, c4 = st.columns(4)
        n_nets = int(c1.number_input("Stand-in nets", 1, MAX_NETS, 5, key="cal_n_nets"))
        first_seed = int(c2.number_input("Seed of the first net", 0, 10_000, 0, key="cal_first_seed",
                                         help="The nets use consecutive seeds from here."))
        n_triplets = int(c3.select_slider("Triplets (train and test, each)", TRIPLET_CHOICES, value=600,
                                          key="cal_triplets"))
        steps = int(c4.number_input("Fitting steps", 0, 2000, 300, step=50, key="cal_steps"))
        with st.expander("Data seeds and learning rate"):
            d1, d2, d3 = st.columns(3)
            train_seed = int(d1.number_input("Training triplets seed", 0, 10_000, 1, key="cal_train_seed"))
            test_seed = int(d2.number_input("Test triplets seed", 0, 10_000, 2, key="cal_test_seed"))
            lr = float(d3.select_slider("Adam learning rate", LR_CHOICES, value=0.05, key="cal_lr"))
        real_nets = st.multiselect(
            "Also score the test triplets with the real LPIPS (baseline and lin)", real_options, default=real_default,
            format_func=lambda n: NET_LABELS[n], key="cal_real_nets",
            help="Uses the sidebar's version. VGG16 takes about two minutes on a CPU, seconds on a GPU.",
        )
        submitted = st.form_submit_button("Run the experiment", type="primary", key="cal_run")
    for net in cal.REAL_NETS:
        if not status[net][0]:
            st.caption(f"{NET_LABELS[net]} cannot be scored here: {md_escape(status[net][1], links=True)}")

    if submitted:
        st.session_state[state.CAL_LAST] = dict(
            net_seeds=tuple(range(first_seed, first_seed + n_nets)), n=n_triplets, steps=steps, lr=lr,
            train_seed=train_seed, test_seed=test_seed, real=tuple(real_nets), version=cfg.version,
        )


def show_results(last: dict, cfg: MetricSpec) -> None:
    """Run (or fetch from the cache) the experiment of the last submitted settings and show it."""
    result = run_2afc(last["net_seeds"], last["n"], last["steps"], last["lr"], last["train_seed"], last["test_seed"])
    real: dict[str, cal.RealLPIPSResult] = {}
    for net in last["real"]:
        spec = cfg.replace(net=net, version=last["version"], lin=True)  # the lin weights are what it fits against
        model = get_model(spec)
        if model is None:
            real[net] = cal.RealLPIPSResult(net, spec.version, None, None, "weights unavailable (see above)")
        else:
            real[net] = real_scores(spec.name, device_name(), last["n"], last["test_seed"], model)

    st.caption("Results for: " + _settings_text(last)
               + ("" if not last["real"] else " · real LPIPS v" + last["version"] + ": "
                  + ", ".join(NET_LABELS[n] for n in last["real"])))
    st.plotly_chart(figs.twoafc_bars(result, real), key="cal_afc_fig")
    rows = figs.twoafc_rows(result, real)
    st.dataframe(
        pd.DataFrame({label: {"all": a.all, "noise": a.noise, "DCT": a.dct} for label, a in rows.items()}).T,
        key="cal_afc_table",
        column_config={c: st.column_config.NumberColumn(format="%.3f") for c in ("all", "noise", "DCT")},
    )
    gains = [s.lin.all - s.unweighted.all for s in result.standins]
    st.markdown(
        f"L2 agrees with the constructed answers on **{result.l2.all:.3f}** of the test triplets. With all weights 1 "
        f"the stand-ins range from **{min(s.unweighted.all for s in result.standins):.3f}** to "
        f"**{max(s.unweighted.all for s in result.standins):.3f}**; fitting the channel weights changes each by "
        f"**{min(gains):+.3f}** to **{max(gains):+.3f}**."
    )
    for res in real.values():
        if res.available:
            st.caption(f"{res.label}: {md_escape(res.note, links=True)}")

    st.subheader("What the fit did")
    c1, c2 = st.columns(2)
    seed_choice = c1.selectbox("Stand-in", [s.seed for s in result.standins], key="cal_weights_net",
                               format_func=lambda s: f"net {s}")
    chosen = next(s for s in result.standins if s.seed == seed_choice)
    st.plotly_chart(figs.fitted_weights(chosen), key="cal_weights_fig")
    c2.metric("Training agreement, w = 1 → lin", f"{chosen.train_unweighted.all:.3f} → {chosen.train_lin.all:.3f}")
    st.plotly_chart(figs.training_loss(result), key="cal_loss_fig")


def _results(cfg: MetricSpec) -> None:
    """The last submitted experiment's results, or how to run one."""
    last = st.session_state.get(state.CAL_LAST)
    if last is None:
        st.info("The defaults are the reference example's settings (5 nets, 600 + 600 triplets, 300 steps): one to "
                "two minutes on a 2-core CPU, then kept. Press **Run the experiment**.", icon=":material/play_arrow:")
    else:
        show_results(last, cfg)


def _what_calibration_buys() -> None:
    """What the fit can and cannot do, in four points."""
    st.subheader("What calibration buys, and what it does not")
    st.markdown(
        "- **It buys a choice of channels.** The distance stays a weighted sum of the same per-channel terms; the fit "
        "can turn down channels that react to the harmless shift and turn up those that react to noise and block "
        "artifacts. A weight driven to 0 is a channel the metric now ignores.\n"
        "- **It cannot add what the features lack.** A channel that reacts alike to the shift and to the damage is "
        "useless at any weight, so where a stand-in ends up after fitting still depends on the features it started "
        "with.\n"
        "- **Here it is graded on its own training distribution.** The weights were fitted on exactly the two "
        "distortion kinds they are tested on, so the gain likely overstates what the same weights would do on "
        "distortions they never saw. The LPIPS paper greys out its distortion-set scores for the same reason; on "
        "its real-algorithm sets, lin calibration moved "
        "AlexNet from 65.0% to 65.3% and VGG from 62.6% to 64.1%.\n"
        "- **Random features are not a trained network.** The real AlexNet and VGG16 rows show how far pretrained "
        "features already separate a one-pixel shift from visible damage before any calibration."
    )


def main() -> None:
    """The page, top to bottom."""
    _intro()
    _mechanics()
    _twoafc_intro()
    cfg = sidebar_spec()
    _experiment_form(cfg)
    _results(cfg)
    _what_calibration_buys()


main()
