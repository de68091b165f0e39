"""Explain's race: configurations that cannot reach the reported value drop out as the pairs come
in, and the rows that must be exact — the first ``exact_rows`` of the ranking and every row whose
interval holds the value — and the verdict equal the full search's (``race=False``), value for
value. On three seeded sets of 64 px pairs (AlexNet, distortions of varying kind and strength)
and on the demo set; the progress reports pair × configuration scores and configurations left.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage

from lpips_core.datasets import match_folders, score_pairs
from lpips_core.datasets.explain import (ExplainProgress, _race_rounds, explain, race_check, race_drops)
from lpips_core.spec import MetricSpec

#: 2 versions x lin/baseline x 3 input ranges x colour/gray x native/32 px: 48 configurations, 24
#: AlexNet passes per image (the tests stay fast); the ranking's first rows are the CLI's default.
SEARCH = dict(nets=("alex",), sizes=(None, 32), workers=0)
TOP = 10


def _write_set(root, seed: int, n: int = 12, side: int = 64):
    """``n`` pairs: a smooth random image, and a blur, noise or shift of it (by the seed) of seeded strength."""
    rng = np.random.default_rng(seed)
    ref, test = root / "ref", root / "test"
    ref.mkdir(parents=True)
    test.mkdir(parents=True)
    for i in range(n):
        base = ndimage.gaussian_filter(rng.random((side, side, 3)), sigma=(*rng.uniform(1, 4, 2), 0))
        base = np.clip((base - base.min()) / (np.ptp(base) + 1e-9) + 0.15 * rng.random((side, side, 3)), 0, 1)
        strength = rng.uniform(0.5, 1.0)
        kind = seed % 3
        if kind == 0:
            out = ndimage.gaussian_filter(base, sigma=(2.5 * strength, 2.5 * strength, 0))
        elif kind == 1:
            out = np.clip(base + rng.normal(0, 0.12 * strength, base.shape), 0, 1)
        else:
            out = np.roll(base, int(1 + 3 * strength), axis=1)
        for folder, arr in ((ref, base), (test, out)):
            Image.fromarray(np.round(arr * 255).astype(np.uint8)).save(folder / f"{i:02d}.png")
    return match_folders(ref, test)


@pytest.fixture(scope="module")
def models():
    return {(s := MetricSpec("lpips", "alex", v)): s.build("cpu") for v in ("0.1", "0.0")}


def _mean(disc, spec: str) -> float:
    return score_pairs(disc, [spec], workers=0).summary["metrics"][spec]["mean"]


def _assert_race_equals_full(disc, reported: float, models, **kw) -> dict:
    """The raced JSON's first rows, every holding row, the verdict and its sentence equal the full search's."""
    full = explain(disc, reported, models=models, race=False, **SEARCH, **kw).to_json()
    raced = explain(disc, reported, models=models, **SEARCH, **kw).to_json()
    assert raced["race"]["raced"] and not full["race"]["raced"]
    assert raced["candidates"][:TOP] == full["candidates"][:TOP]
    assert all(c["complete"] for c in raced["candidates"][:TOP])
    for key in ("verdict", "sentence", "holding", "pairs", "skipped", "searched"):
        assert raced[key] == full[key], key
    by_config = {c["config"]: c for c in raced["candidates"]}
    for c in full["candidates"]:
        if c["holds_reported"]:
            assert by_config[c["config"]] == c
    # the printed table (the CLI's) is the same text, but for the line that says how the race went
    assert _printed(raced, TOP) == _printed(full, TOP)
    return raced


def _printed(out: dict, top: int) -> list[str]:
    import contextlib
    import io

    from lpips_core.cli.explain import print_explain

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_explain({**out, "candidates": out["candidates"][:top]})
    return [line for line in buf.getvalue().splitlines() if not line.startswith("raced:")]


@pytest.mark.parametrize("seed, reported_by", [
    (1, "lpips-alex-0.1-lin-[-1,1]"),       # the default configuration's number: several intervals hold it
    (2, "lpips-alex-0.0-baseline-[0,1]-gray@32"),  # a baseline at 32 px, among many others
    (3, None),                               # a number no configuration comes near: verdict "none"
])
def test_the_race_gives_the_full_searchs_first_rows_and_verdict(tmp_path, models, seed, reported_by):
    disc = _write_set(tmp_path, seed)
    reported = _mean(disc, reported_by) if reported_by else 1e-3
    raced = _assert_race_equals_full(disc, reported, models)
    race = raced["race"]
    # the race decided something: configurations dropped (and stayed out, or were checked back in)
    assert race["dropped"] + race["finished"] > 0, race
    assert race["rounds"] == [6, 8, 10, 12] and race["configurations"] == 48
    if race["dropped"]:
        assert race["scores"] < race["scores_full"] and race["passes"] < race["passes_full"]
        dropped = [c for c in raced["candidates"] if not c["complete"]]
        assert dropped and all(not c["holds_reported"] and c["n"] < raced["pairs"] for c in dropped)
        # listed after every complete row
        first = raced["candidates"].index(dropped[0])
        assert all(not c["complete"] for c in raced["candidates"][first:])
    if reported_by is None:
        assert raced["verdict"] == "none"


@pytest.mark.slow  # 2 x 72 configurations on the demo set's 96 px pairs, sizes up to 256 px (full tier)
@pytest.mark.parametrize("method, spec", [("A-blur", "lpips-alex-0.1-lin-[-1,1]"),
                                          ("B-shift-noise", "lpips-alex-0.1-baseline-[0,1]@64")])
def test_the_race_on_the_demo_set(tmp_path, models, method, spec):
    from lpips_explorer.demo_dataset import make_demo

    demo = make_demo(tmp_path / "demo")
    disc = match_folders(demo.reference, demo.methods[method])
    reported = round(_mean(disc, spec), 3)  # as a paper prints it
    kw = dict(name="LPIPS-Alex", models=models, workers=0)
    full = explain(disc, reported, race=False, **kw).to_json()
    raced = explain(disc, reported, **kw).to_json()
    assert raced["candidates"][:TOP] == full["candidates"][:TOP]
    assert [raced[k] for k in ("verdict", "sentence", "holding")] == [full[k] for k in ("verdict", "sentence",
                                                                                          "holding")]
    assert _printed(raced, TOP) == _printed(full, TOP)


@pytest.mark.slow  # 2 x 48 VGG16 configurations on the demo set's 96 px pairs (full tier)
def test_the_race_on_the_demo_set_with_vgg(tmp_path):
    from lpips_core.spec import parse_spec
    from lpips_explorer.demo_dataset import make_demo

    demo = make_demo(tmp_path / "demo")
    disc = match_folders(demo.reference, demo.methods["A-blur"])
    vgg = {(s := MetricSpec("lpips", "vgg", v)): s.build("cpu") for v in ("0.1", "0.0")}
    reported = round(_mean(disc, parse_spec("lpips-vgg").name), 3)
    kw = dict(name="LPIPS (VGG)", models=vgg, sizes=(None, 64), workers=0)
    full = explain(disc, reported, race=False, **kw).to_json()
    raced = explain(disc, reported, **kw).to_json()
    assert raced["candidates"][:TOP] == full["candidates"][:TOP]
    assert [raced[k] for k in ("verdict", "sentence", "holding")] == [full[k] for k in ("verdict", "sentence",
                                                                                          "holding")]
    assert raced["race"]["passes"] <= raced["race"]["passes_full"]


def test_progress_counts_scores_and_configurations_left(tmp_path, models):
    disc = _write_set(tmp_path, 2)
    calls, states = [], []
    res = explain(disc, _mean(disc, "lpips-alex-0.0-baseline-[0,1]-gray@32"), models=models,
                  progress=lambda d, t: calls.append((d, t)), status=states.append, **SEARCH)
    assert calls == [(s.done, s.total) for s in states]
    assert calls[0] == (0, 12 * 48) and calls[-1][0] == calls[-1][1]
    done = [d for d, _ in calls]
    totals = [t for _, t in calls]
    assert done == sorted(done) and totals == sorted(totals) and all(d <= t for d, t in calls)
    assert len(set(done)) >= 4  # it moves: at least once a round
    assert all(isinstance(s, ExplainProgress) and s.configurations == 48 and 0 <= s.left <= 48 for s in states)
    assert states[0].left == 48 and min(s.left for s in states) < 48  # configurations dropped out as it went
    assert [s.pairs_done for s in states] == sorted(s.pairs_done for s in states)
    assert states[-1].pairs_done == states[-1].pairs == 12
    assert "pair × configuration scores" in states[-1].text and "configurations left" in states[-1].text
    assert res.race["scores"] <= res.race["scores_full"] == 12 * 48


def test_a_full_search_reports_every_configuration_on_every_pair(tmp_path, models):
    disc = _write_set(tmp_path, 1)
    calls = []
    res = explain(disc, 0.1, models=models, race=False, progress=lambda d, t: calls.append((d, t)), **SEARCH)
    assert calls[-1] == (12 * 48, 12 * 48)
    assert res.race == {**res.race, "raced": False, "dropped": 0, "finished": 0, "scores": 12 * 48}
    assert all(c.complete and c.n == 12 for c in res.candidates)


def test_drop_rule():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.1, 0.3, 6)
    # rows: near the value (tight), far above it, and far above it with a wide spread
    values = np.stack([base, base * 1.02, base + 1.0, base + 1.0 + rng.normal(0, 2.0, 6)])
    reported = float(base.mean())
    # one certainly-closer row needed: the far tight row drops, the wide one (it can reach) does not
    assert race_drops(values, reported, 12, exact_rows=1).tolist() == [False, False, True, False]
    # two needed: the rows near the value are the only closer ones; three needed: nothing drops
    assert race_drops(values, reported, 12, exact_rows=2).tolist() == [False, False, True, False]
    assert not race_drops(values, reported, 12, exact_rows=3).any()
    # a pass drops only with all its configurations; fewer than three pairs, or none left: nothing drops
    assert race_drops(values, reported, 12, exact_rows=1, families=[0, 1, 2, 2]).tolist() == [False] * 4
    assert not race_drops(values[:, :2], reported, 12, exact_rows=1).any()
    assert not race_drops(values, reported, 6, exact_rows=1).any()
    # rows with the same values are one row: a twin of the near row does not count as closer
    twins = np.stack([base, base, base + 1.0])
    assert race_drops(twins, reported, 12, exact_rows=2).tolist() == [False, False, False]
    assert race_drops(twins, reported, 12, exact_rows=1).tolist() == [False, False, True]


def test_drop_check():
    rng = np.random.default_rng(1)
    anchor = rng.uniform(0.1, 0.5, 12)
    tracking = 3.0 * anchor + rng.normal(0, 0.005, 12)  # far above 0.2, tracks the anchor pair by pair
    scored = np.arange(8)
    assert race_check(tracking[scored], scored, anchor[None], 0.2, kth=0.1)
    assert not race_check(tracking[scored], scored, anchor[None], 0.2, kth=5.0)  # it could be a first row
    # an anchor that says nothing of it (its values unrelated): the drop is not confirmed
    unrelated = rng.uniform(0.1, 0.5, 12)
    noisy = 3.0 * unrelated + rng.normal(0, 0.6, 12)
    assert not race_check(noisy[scored], scored, anchor[None], 0.2, kth=0.1)
    assert not race_check(tracking[:3], np.arange(3), anchor[None], 0.2, kth=0.1)  # too few pairs


def test_rounds():
    assert _race_rounds(12, 2) == [(0, 6), (6, 8), (8, 10), (10, 12)]
    assert _race_rounds(12, 1) == [(0, 6), (6, 8), (8, 10), (10, 12)]
    assert _race_rounds(4, 2) == [(0, 4)]
    assert _race_rounds(100, 2)[:5] == [(0, 6), (6, 8), (8, 10), (10, 12), (12, 16)]
    assert _race_rounds(100, 2)[-1][1] == 100


def test_the_cli_races_by_default_and_all_or_no_race_search_every_pair(tmp_path, capsys, monkeypatch, models):
    import functools

    from lpips_core.__main__ import main
    from lpips_core.datasets import explain as explain_module

    # the CLI's search at native and 32 px only, on this module's models (the CLI's own sizes cost 5x more)
    monkeypatch.setattr(explain_module, "explain", functools.partial(explain, sizes=(None, 32), models=models))
    disc = _write_set(tmp_path, 2)
    ref, test = (str(tmp_path / "ref"), str(tmp_path / "test"))
    reported = repr(_mean(disc, "lpips-alex-0.0-baseline-[0,1]-gray@32"))
    outs = {}
    for flags in ((), ("--no-race",), ("--all",)):
        assert main(["explain", ref, test, "--reported", reported, "--nets", "alex", "--workers", "0", "--json",
                     *flags]) == 0
        outs[flags] = json.loads(capsys.readouterr().out)
    raced, exact = outs[()], outs[("--no-race",)]
    assert raced["race"]["raced"] and raced["race"]["dropped"] > 0
    assert not exact["race"]["raced"] and not outs[("--all",)]["race"]["raced"]
    assert raced["candidates"] == exact["candidates"]  # --top 10 rows
    assert [raced[k] for k in ("verdict", "sentence")] == [exact[k] for k in ("verdict", "sentence")]
    assert main(["explain", ref, test, "--reported", reported, "--nets", "alex", "--workers", "0"]) == 0
    text = capsys.readouterr().out
    assert "raced: " in text and "the first 10 rows and the verdict are the full search's" in text


def test_a_scorer_computes_its_active_configurations_as_a_full_run_does(tmp_path, models):
    """``Scorer.active``: the inactive configurations' passes are skipped, the active ones' values are
    bit-equal to a run of every configuration — also @64 on 64 px images, whose values come from the
    native pass when the native configuration is inactive."""
    from lpips_core.datasets import Scorer
    from lpips_core.spec import MetricSpec

    disc = _write_set(tmp_path, 3)
    specs = [MetricSpec("lpips", "alex", "0.1", lin, "[-1,1]", gray, size)
             for size in (None, 32, 64) for gray in (False, True) for lin in (True, False)]
    built = {k: m for k, m in models.items() if k.version == "0.1"}
    sc = Scorer(specs, device="cpu", models=built)
    full = score_pairs(disc, scorer=sc, workers=0, batch_size=4).rows
    for active in ([specs[8]], [specs[9], specs[2]], [specs[4], specs[11]]):  # @64 lin; @64 base + @32 lin; ...
        passes = []
        sc.active, sc.on_pass = frozenset(s.name for s in active), lambda p, n: passes.append((p, n))
        try:
            rows = score_pairs(disc, scorer=sc, workers=0, batch_size=4).rows
        finally:
            sc.active = sc.on_pass = None
        for got, want in zip(rows, full):
            for s in active:
                assert got[s.name] == want[s.name]
        assert sum(p * n for p, n in passes) == 12 * len(active)  # each active value reported once


def test_a_pair_too_small_for_a_dropped_native_pass_is_skipped_as_in_a_full_search(tmp_path, models):
    """Pairs 03 and 08 are 24 px: AlexNet (31 px at least) refuses them at native size, so a full
    search skips them. The race drops the native configuration after the first round (6 pairs),
    before it reaches them, so it never runs the pass that would refuse them: it skips them all the
    same, and the 32 px configuration's row is the full search's."""
    disc = _write_set(tmp_path, 1)
    for key in ("03", "08"):
        for folder in ("ref", "test"):
            path = tmp_path / folder / f"{key}.png"
            Image.open(path).resize((24, 24), Image.BILINEAR).save(path)
    kw = dict(nets=("alex",), versions=("0.1",), lins=(False,), conventions=("[0,255]",), grayscale=(False,),
              sizes=(None, 32), workers=0, models=models, exact_rows=1)
    reported = _mean(disc, "lpips-alex-0.1-baseline-[0,255]@32")
    full = explain(disc, reported, race=False, **kw).to_json()
    raced = explain(disc, reported, **kw).to_json()
    native = next(c for c in raced["candidates"] if c["config"] == "lpips-alex-0.1-baseline-[0,255]")
    assert not native["complete"] and native["n"] == 6  # dropped after the first round
    assert raced["skipped"] == full["skipped"] == {"too-small": 2} and raced["pairs"] == full["pairs"] == 10
    assert raced["candidates"][0] == full["candidates"][0]
    assert [raced[k] for k in ("verdict", "sentence")] == [full[k] for k in ("verdict", "sentence")]


def test_the_race_in_scoring_lanes(tmp_path, models):
    """In two scoring lanes (forked processes that count their passes in shared memory, read by a
    thread of this one) the race equals the full search there, and the progress still only grows."""
    disc = _write_set(tmp_path, 3)
    kw = dict(nets=("alex",), sizes=(None, 32), models=models, lanes=2, workers=None)
    full = explain(disc, 1e-3, race=False, **kw).to_json()
    calls = []
    raced = explain(disc, 1e-3, progress=lambda d, t: calls.append((d, t)), **kw).to_json()
    assert raced["race"]["lanes"] == 2 and raced["race"]["dropped"] > 0
    assert raced["candidates"][:TOP] == full["candidates"][:TOP]
    assert [raced[k] for k in ("verdict", "sentence", "holding")] == [full[k] for k in ("verdict", "sentence",
                                                                                          "holding")]
    done = [d for d, _ in calls]
    assert done == sorted(done) and calls[-1][0] == calls[-1][1]


def test_the_race_in_lane_threads(tmp_path, models):
    """In two lanes that are threads of this process (the app's) the full search equals the one in
    forked lanes, the race equals the full search, and the progress comes in the calling thread
    (where a page can draw it), only growing, to the end."""
    import threading

    disc = _write_set(tmp_path, 3)
    kw = dict(nets=("alex",), sizes=(None, 32), models=models, lanes=2, workers=0)
    forked = explain(disc, 1e-3, race=False, **kw).to_json()
    full = explain(disc, 1e-3, race=False, lane_kind="thread", **kw).to_json()
    calls = []
    raced = explain(disc, 1e-3, lane_kind="thread", progress=lambda d, t: calls.append((threading.get_ident(), d, t)),
                    **kw).to_json()
    assert full["candidates"] == forked["candidates"]
    assert raced["race"]["lanes"] == 2 and raced["race"]["dropped"] > 0
    assert raced["candidates"][:TOP] == full["candidates"][:TOP]
    assert [raced[k] for k in ("verdict", "sentence", "holding")] == [full[k] for k in ("verdict", "sentence",
                                                                                          "holding")]
    assert {t for t, _, _ in calls} == {threading.get_ident()}
    done = [d for _, d, _ in calls]
    assert done == sorted(done) and calls[-1][1] == calls[-1][2] and len(calls) > 2
