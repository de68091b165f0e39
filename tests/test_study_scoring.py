"""2AFC scoring (lpips_explorer.study.scoring) against a hand-computed example, the ceiling, the bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from lpips_core import metric_registry
from lpips_core.spec import MetricSpec, standard_specs
from lpips_explorer.study import scoring as S

# Three triplets, five judges A–E. Choices: 0 = first copy closer, 1 = second, 2 = can't tell.
#            A  B  C  D  E
CHOICES = [[1, 1, 1, 0, 2],   # triplet 0: h = (3 + ½) / 5 = 0.7
           [0, 0, 0, 0, 1],   # triplet 1: h = 1 / 5 = 0.2
           [2, 2, 1, 0, 0]]   # triplet 2: h = (1 + ½ + ½) / 5 = 0.4
JUDGEMENTS = [(judge, t, CHOICES[t][k]) for t in range(3) for k, judge in enumerate("ABCDE")]
# A distance X: prefers p1 on triplet 0 (scores h = 0.7), p0 on triplet 1 (1 − h = 0.8), ties on 2 (0.5).
X = ([0.3, 0.2, 0.4], [0.1, 0.5, 0.4])
# A similarity Y (higher is closer): prefers p0 on 0 (0.3), p1 on 1 (0.2), ties on 2 (0.5).
Y = ([0.9, 0.1, 0.7], [0.8, 0.6, 0.7])


def _h():
    fr = S.judge_fractions([t for _, t, _ in JUDGEMENTS], [c for _, _, c in JUDGEMENTS])
    return fr, np.array([fr[i][0] for i in range(3)])


def test_judge_fractions_count_cant_tell_as_half():
    fr, h = _h()
    assert fr == {0: (0.7, 5), 1: (0.2, 5), 2: (0.4, 5)}


def test_two_afc_equals_the_hand_computation_exactly():
    _, h = _h()
    np.testing.assert_array_equal(S.two_afc_scores(*X, h), [0.7, 0.8, 0.5])
    assert S.two_afc(*X, h) == (0.7 + 0.8 + 0.5) / 3 == 2 / 3
    # 1 − 0.7 is 0.30000000000000004 in binary floating point: equal to the last bit of that
    np.testing.assert_array_equal(S.two_afc_scores(*Y, h, higher_is_closer=True), [1 - 0.7, 0.2, 0.5])
    assert S.two_afc(*Y, h, higher_is_closer=True) == pytest.approx(1 / 3, abs=1e-15)
    assert list(S.prefers(*X)) == [1, 0, -1]


def test_human_ceiling_formula():
    _, h = _h()
    # p² + (1 − p)²: 0.49 + 0.09, 0.04 + 0.64, 0.16 + 0.36
    np.testing.assert_allclose(S.human_ceiling_scores(h), [0.58, 0.68, 0.52], rtol=0, atol=1e-15)
    assert S.human_ceiling(h) == pytest.approx(1.78 / 3, abs=1e-15)
    assert S.human_ceiling([0.0, 1.0]) == 1.0 and S.human_ceiling([0.5]) == 0.5


def test_bootstrap_is_seeded_and_reproducible():
    scores = np.random.default_rng(3).random(40)
    a = S.bootstrap_ci(scores, n_boot=500, seed=7)
    assert a == S.bootstrap_ci(scores, n_boot=500, seed=7)
    assert a != S.bootstrap_ci(scores, n_boot=500, seed=8)
    assert a[0] < scores.mean() < a[1]
    # the percentile bootstrap, recomputed independently
    rng = np.random.default_rng(7)
    means = np.array([scores[rng.integers(0, 40, size=40)].mean() for _ in range(500)])
    assert a == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])), abs=1e-12)
    assert S.bootstrap_ci([0.5, 0.5, 0.5], seed=1) == (0.5, 0.5)
    assert all(np.isnan(S.bootstrap_ci([])))


def test_summarize_pools_the_class_and_scores_one_judge():
    """A distance (MSE) and a similarity (SSIM) scored from their values: the spec says which."""
    specs = [MetricSpec("mse"), MetricSpec("ssim")]
    res = S.summarize({"mse": X, "ssim": Y}, ["a", "a", "b"], JUDGEMENTS, specs, session="A", n_boot=200, seed=0)
    assert res["n_judges"] == 5 and res["n_judgements"] == 15 and res["unavailable"] == []
    cls = {m["key"]: m for m in res["class"]["metrics"]}
    assert [m["label"] for m in res["class"]["metrics"]] == ["MSE", "SSIM"]
    assert cls["mse"]["score"] == 2 / 3 and cls["mse"]["n"] == 3
    assert cls["ssim"]["score"] == pytest.approx(1 / 3, abs=1e-15)
    assert res["class"]["ceiling"]["score"] == pytest.approx(1.78 / 3, abs=1e-15)
    assert res["class"]["by_family"]["a"]["mse"] == pytest.approx(0.75) and res["class"]["by_family"]["b"]["mse"] == 0.5
    # judge A alone: h = 1, 0, ½ → MSE scores 1, 1, ½; SSIM 0, 0, ½
    you = {m["key"]: m["score"] for m in res["you"]["metrics"]}
    assert you == {"mse": pytest.approx(2.5 / 3), "ssim": pytest.approx(0.5 / 3)}
    assert [p["scores"]["mse"] for p in res["per_triplet"]] == [0.7, 0.8, 0.5]
    # a metric with no values is reported, not scored
    res2 = S.summarize({"mse": X}, ["a", "a", "b"], JUDGEMENTS, specs, n_boot=10)
    assert res2["unavailable"] == ["ssim"] and res2["you"] is None


def test_a_study_scores_the_standard_specs_which_follow_the_registry():
    keys = [s.name for s in standard_specs()]
    assert keys[:3] == ["mse", "psnr", "ssim"]
    for name, info in metric_registry.METRICS.items():
        for net in info.nets:
            assert MetricSpec(name, net=net).name in keys
            assert (info.has_baseline and MetricSpec(name, net=net, lin=False).name in keys) == info.has_baseline
    assert {"lpips-alex-0.1-lin-[-1,1]", "lpips-vgg-0.1-lin-[-1,1]", "lpips-alex-0.1-baseline-[-1,1]",
            "lpips-vgg-0.1-baseline-[-1,1]", "stlpips-alex-[-1,1]", "dists-vgg-[0,1]"} <= set(keys)


@pytest.mark.parametrize("stored, name", [
    ("mse", "mse"), ("psnr", "psnr"), ("lpips-alex", "lpips-alex-0.1-lin-[-1,1]"),
    ("lpips-vgg-baseline", "lpips-vgg-0.1-baseline-[-1,1]"), ("stlpips-alex", "stlpips-alex-[-1,1]"),
    ("dists-vgg", "dists-vgg-[0,1]"), ("lpips-squeeze-0.1-lin-[-1,1]", "lpips-squeeze-0.1-lin-[-1,1]"),
    ("not a metric", "not a metric"),
])
def test_stored_keys_of_earlier_studies_read_as_spec_names(stored, name):
    """Studies stored before the keys were spec names used short keys; they read back as the names."""
    assert S.stored_key(stored) == name


def test_study_distances_equal_one_at_a_time():
    from lpips_explorer.study import triplets as T

    trip = [T.render(r) for r in T.make_recipes(3, families=["shift-vs-blur"], seed=4)]
    alex = MetricSpec("lpips", net="alex")
    vs = [MetricSpec("mse"), MetricSpec("ssim"), alex]
    models = {alex: alex.build()}
    batch = S.study_distances(trip, vs, models)
    for i, t in enumerate(trip):
        one = S.triplet_distances(t.ref, t.p0, t.p1, vs, models)
        assert one["mse"] == (batch["mse"][0][i], batch["mse"][1][i])
        assert one[alex.name] == pytest.approx((batch[alex.name][0][i], batch[alex.name][1][i]), rel=1e-5)
        d = models[alex](alex.prepare(t.ref), alex.prepare(t.p0)).item()
        assert one[alex.name][0] == pytest.approx(d, rel=1e-5)  # the model on the pair, directly
    with pytest.raises(TypeError, match="LPIPS · AlexNet \\(baseline\\) needs its own model"):
        S.study_distances(trip, [alex.replace(lin=False)], {alex.replace(lin=False): models[alex]})


@pytest.mark.parametrize("call, match", [
    (lambda: S.judge_fractions([0], [3]), "choice must be one of"),
    (lambda: S.judge_fractions([0, 1], [0]), "2 triplet indices but 1 choices"),
    (lambda: S.two_afc_scores([1, 2], [2, 1], [0.5, 1.5]), "h must be in"),
    (lambda: S.two_afc_scores([1, 2], [2], [0.5, 0.5]), "same length"),
    (lambda: S.bootstrap_ci([1.0], n_boot=0), "n_boot must be"),
    (lambda: S.bootstrap_ci([1.0], level=1.0), "level must be"),
])
def test_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
