"""The protocol every learned metric follows (lpips_core.protocol), tested once for all of them.

Each case is a registry metric with one of its nets, fed under its own convention; the golden
64×64 examples are the images. Properties: identity, symmetry, per-layer terms summing to the
total, every path (pair, batch, reference-vs-many, precomputed features, forward) giving the same
numbers, the same errors for bad input, no autograd graph on the inference paths, and the
thread-safe, byte-bounded reference cache shared across sessions.

Tiers: LPIPS-VGG runs the same code as LPIPS-Alex on a bigger backbone, so its cases are marked
``slow`` (full tier); DISTS (VGG16 only) keeps its cheap cases in the fast tier, and its two
multi-pass ones (every path, no graph) run in the full tier, as LPIPS-Alex and ST-LPIPS run them
in the fast one.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from lpips_core import metric_registry as registry
from lpips_core.caching import SHARED_POOL, CachePool, FeatureCache
from lpips_core.protocol import LearnedMetric, MetricResult

CASES = [("lpips", "alex"), ("lpips", "vgg"), ("stlpips", "alex"), ("dists", "vgg")]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def models() -> dict:
    return {}


def _case_params(*slow: tuple[str, str]) -> list:
    """``CASES`` as parameters, those in ``slow`` marked ``slow`` (full tier only)."""
    return [pytest.param(c, id=f"{c[0]}-{c[1]}", marks=[pytest.mark.slow] if c in slow else []) for c in CASES]


FULL_TIER_CASES = (("lpips", "vgg"),)  # every test; plus DISTS for the multi-pass tests below


@pytest.fixture(params=_case_params(*FULL_TIER_CASES))
def case(request, models):
    metric, net = request.param
    if request.param not in models:
        models[request.param] = registry.build(metric, net, device="cpu")
    return metric, models[request.param]


@pytest.fixture(scope="module")
def images(golden):
    return golden["ex_ref"], golden["ex_p0"], golden["ex_p1"]


def _inputs(metric, *imgs):
    return [registry.prepare_input(metric, im) for im in imgs]


def test_is_a_learned_metric_of_its_registry_entry(case):
    metric, model = case
    assert isinstance(model, LearnedMetric) and registry.model_metric(model) == metric
    assert model.input_range == registry.correct_convention(metric)
    assert not any(p.requires_grad for p in model.parameters())
    model.train()
    assert not model.training


def test_identity_gives_zero(case, images):
    metric, model = case
    (x,) = _inputs(metric, images[0])
    res = model.compare(x, x)
    assert isinstance(res, MetricResult)
    assert abs(float(res.total[0])) < 1e-6
    assert float(res.per_layer.abs().max()) < 1e-6
    if registry.METRICS[metric].has_maps:
        assert float(res.total[0]) == 0.0 and float(res.layer_maps.abs().max()) == 0.0


def test_symmetry(case, images):
    metric, model = case
    x, y = _inputs(metric, images[0], images[1])
    assert float(model(x, y)) == pytest.approx(float(model(y, x)), abs=1e-6)


def test_per_layer_terms_sum_to_total(case, images):
    metric, model = case
    x, y = _inputs(metric, images[0], images[2])
    res = model.compare(x, y)
    assert res.per_layer.shape == (1, len(res.layer_names)) == (1, len(model.layer_names))
    np.testing.assert_allclose(res.per_layer.sum(1), res.total, rtol=1e-6, atol=1e-7)
    info = registry.METRICS[metric]
    assert tuple(res.components) == info.components
    if res.components:
        np.testing.assert_allclose(sum(res.components.values()), res.per_layer, atol=1e-6)
    if info.has_maps:
        assert res.layer_maps.shape == (1, len(res.layer_names), 64, 64)
        # the upsampled maps average to the terms up to bilinear border weighting (< 1e-4 measured)
        assert float(res.spatial_map.mean()) == pytest.approx(float(res.total[0]), rel=1e-3)
    else:
        assert res.layer_maps is None


@pytest.mark.parametrize("case", _case_params(*FULL_TIER_CASES, ("dists", "vgg")), indirect=True)
def test_every_path_gives_the_same_numbers(case, images):
    metric, model = case
    x, y0, y1 = _inputs(metric, *images)
    ys = torch.cat([y0, y1])
    singles = torch.cat([model.compare(x, y0).total, model.compare(x, y1).total])
    assert float(singles[1]) != pytest.approx(float(singles[0]), abs=1e-3)  # two different pairs
    paths = {
        "pairs": model.compare(torch.cat([x, x]), ys).total,
        "broadcast": model.compare(x, ys).total,
        "batch": model.compare_batch(x, ys).total,
        "batch chunk 1": model.compare_batch(x, ys, chunk=1).total,
        "features": model.compare_features(model.reference_features(x), model.features(ys)).total,
        "forward": model(torch.cat([x, x]), ys).cpu(),
    }
    for name, got in paths.items():
        np.testing.assert_allclose(got, singles, atol=1e-6, err_msg=name)
    cat = MetricResult.cat([model.compare(x, y0), model.compare(x, y1)])
    np.testing.assert_allclose(cat.per_layer, model.compare(x, ys).per_layer, atol=1e-6)
    assert tuple(cat.components) == tuple(model.compare(x, y0).components)


def test_bad_input(case):
    metric, model = case
    x = torch.zeros(1, 3, 64, 64)
    with pytest.raises(TypeError, match="torch.Tensor"):
        model(np.zeros((1, 3, 64, 64), np.float32), x)
    with pytest.raises(ValueError, match=r"shape \(N, 3, H, W\)"):
        model(torch.zeros(3, 64, 64), x)
    with pytest.raises(ValueError, match="same size"):
        model.compare(x, torch.zeros(1, 3, 64, 65))
    with pytest.raises(TypeError, match="float tensor"):
        model(x.to(torch.uint8), x)
    with pytest.raises(ValueError, match="do not broadcast"):
        model.compare(torch.zeros(2, 3, 64, 64), torch.zeros(3, 3, 64, 64))
    with pytest.raises(ValueError, match="empty batch"):
        model.compare(torch.zeros(0, 3, 64, 64), x)
    with pytest.raises(ValueError, match="cannot be compared"):
        model.compare_features(model.features(x), model.features(torch.zeros(1, 3, 72, 72)))
    with pytest.raises(ValueError, match=r"reference must have shape \(1, 3, H, W\)"):
        model.compare_batch(torch.cat([x, x]), x)
    if registry.METRICS[metric].has_maps:
        with pytest.raises(ValueError, match="too small"):
            model(torch.zeros(1, 3, 8, 8), torch.zeros(1, 3, 8, 8))
    else:  # DISTS's L2 pools pad: an 8 px image still reaches relu5_3, as in the reference
        with pytest.raises(ValueError, match="no spatial map"):
            model.compare(x, x, spatial=True)


def test_features_of_another_metric_do_not_compare(models, images):
    a = registry.build("lpips", "alex", device="cpu")
    b = registry.build("stlpips", "alex", device="cpu")
    x = registry.prepare_input("lpips", images[0])
    with pytest.raises(ValueError, match="cannot be compared"):
        a.compare_features(a.features(x), b.features(x))


@pytest.mark.parametrize("case", _case_params(*FULL_TIER_CASES, ("dists", "vgg")), indirect=True)
def test_inference_paths_build_no_graph(case, images):
    """compare/features/compare_batch stay graph-free even when the inputs require grad."""
    metric, model = case
    x, y = (t.requires_grad_() for t in _inputs(metric, images[0], images[1]))
    feats = model.features(x)
    assert all(torch.is_inference(m) and not m.requires_grad for m in feats.maps)
    for res in (model.compare(x, y), model.compare_batch(x.detach(), y), model.compare_features(feats, model.features(y))):
        assert res.total.grad_fn is None and not res.total.requires_grad and torch.is_inference(res.total)
    with torch.no_grad():
        assert model(x, y).grad_fn is None
    assert model(x.detach(), y.detach()).grad_fn is None
    assert model(x, y).grad_fn is not None  # the differentiable call


# ----------------------------------------------------------------------------- the shared cache
def _churn_inputs(n: int, size: int = 64) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    return [torch.rand(1, 3, size, size, generator=g) * 2 - 1 for _ in range(n)]


def test_reference_cache_is_byte_bounded():
    model = registry.build("lpips", "alex", device="cpu")
    refs = _churn_inputs(6)
    one = model.features(refs[0]).nbytes
    model.ref_cache = FeatureCache(max_bytes=3 * one)
    for r in refs:
        model.reference_features(r)
        assert model.ref_cache.nbytes <= model.ref_cache.max_bytes
    assert len(model.ref_cache) == 3 and model.ref_cache.nbytes == 3 * one
    first = model.reference_features(refs[-1])
    assert model.reference_features(refs[-1].clone()) is first  # keyed by content, not identity
    small = FeatureCache(max_bytes=one - 1)
    model.ref_cache = small
    model.reference_features(refs[0])
    assert len(small) == 0 and small.nbytes == 0  # an entry over the whole budget is not kept


def test_a_reference_not_kept_uses_the_cache_but_adds_nothing():
    """``reference_features(x, keep=False)`` (a diagnosis's one-off counterfactual references):
    a cached entry is used (a hit), a new one is computed, equal, but not stored."""
    model = registry.build("lpips", "alex", device="cpu")
    model.ref_cache = FeatureCache(max_bytes=1 << 30)
    kept, once = _churn_inputs(2)
    first = model.reference_features(kept)
    hits = model.ref_cache.hits
    assert model.reference_features(kept.clone(), keep=False) is first and model.ref_cache.hits == hits + 1
    one_off = model.reference_features(once, keep=False)
    assert len(model.ref_cache) == 1
    assert all(torch.equal(a, b) for a, b in zip(one_off.maps, model.features(once).maps))
    y = _churn_inputs(3)[2]
    torch.testing.assert_close(model.compare_batch(once, y, keep_reference=False).total, model.compare(once, y).total,
                               rtol=0, atol=1e-6)
    assert len(model.ref_cache) == 1


def test_cache_budget_from_the_environment(monkeypatch):
    monkeypatch.setenv("LPIPS_EXPLORER_CACHE_MB", "1.5")
    assert FeatureCache().max_bytes == int(1.5 * 2**20)
    monkeypatch.setenv("LPIPS_EXPLORER_CACHE_MB", "lots")
    with pytest.raises(ValueError, match="LPIPS_EXPLORER_CACHE_MB"):
        FeatureCache()


def test_caches_of_all_models_share_one_byte_budget(monkeypatch):
    """Several models (as a server holds) stay within the pool's budget together: the least
    recently used entry of any model goes first, and a dead model's entries are forgotten."""
    a, b = (registry.build("lpips", "alex", device="cpu") for _ in range(2))  # two models, equal sizes
    refs = _churn_inputs(4)
    one = a.features(refs[0]).nbytes
    pool = CachePool(max_bytes=3 * one)
    a.ref_cache, b.ref_cache = (FeatureCache(max_bytes=10 * one, pool=pool) for _ in range(2))
    a.reference_features(refs[0])
    a.reference_features(refs[1])
    b.reference_features(refs[0])
    assert pool.nbytes == 3 * one and (len(a.ref_cache), len(b.ref_cache)) == (2, 1)
    a.reference_features(refs[0])  # a hit: a's refs[1] is now the least recently used of all
    b.reference_features(refs[2])  # over the pool's budget: a's refs[1] goes, not b's or a's refs[0]
    assert pool.nbytes == 3 * one == a.ref_cache.nbytes + b.ref_cache.nbytes
    assert (len(a.ref_cache), len(b.ref_cache)) == (1, 2)
    hits = a.ref_cache.hits
    a.reference_features(refs[0])
    assert a.ref_cache.hits == hits + 1  # kept
    a.reference_features(refs[1])
    assert a.ref_cache.hits == hits + 1  # evicted, so computed again
    assert pool.nbytes <= pool.max_bytes
    # a cache that dies leaves nothing counted in the pool
    b.ref_cache = FeatureCache(max_bytes=10 * one, pool=pool)
    import gc

    gc.collect()
    a.reference_features(refs[3])
    assert pool.nbytes == a.ref_cache.nbytes + b.ref_cache.nbytes <= pool.max_bytes
    monkeypatch.setenv("LPIPS_EXPLORER_CACHE_TOTAL_MB", "2")
    assert CachePool().max_bytes == 2 << 20
    monkeypatch.setenv("LPIPS_EXPLORER_CACHE_TOTAL_MB", "-1")
    with pytest.raises(ValueError, match="LPIPS_EXPLORER_CACHE_TOTAL_MB"):
        CachePool().max_bytes
    assert FeatureCache().pool is SHARED_POOL


def test_sixteen_threads_on_one_shared_model():
    """One model shared by 16 threads (as st.cache_resource shares it across sessions), each
    comparing churning references against their distorted copies, with a cache too small for all
    references and a tiny switch interval: no exception, every value equal to a single-threaded run.
    The images are 32 px (AlexNet's smallest side is 31): the sharing is under test, not the size."""
    model = registry.build("lpips", "alex", device="cpu")
    refs = _churn_inputs(7, size=32)
    others = [torch.clamp(r + 0.2 * torch.sin(torch.arange(32.0) / (k + 2)), -1, 1) for k, r in enumerate(refs)]
    want = [float(model.compare(r, o).total[0]) for r, o in zip(refs, others)]
    model.ref_cache = FeatureCache(max_bytes=2 * model.features(refs[0]).nbytes)
    errors, wrong = [], []

    def work(t: int) -> None:
        try:
            for i in range(40):
                k = (t * 3 + i) % len(refs)
                got = float(model.compare_batch(refs[k], others[k]).total[0])
                if abs(got - want[k]) > 1e-6:
                    wrong.append((t, k, got, want[k]))
        except Exception as exc:  # noqa: BLE001 - any exception is the failure being tested for
            errors.append(repr(exc))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(t,)) for t in range(16)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == [] and wrong == []
    assert model.ref_cache.nbytes <= model.ref_cache.max_bytes
    assert model.ref_cache.hits + model.ref_cache.misses >= 16 * 40


#: A branch on a learned metric's name: ``x == "dists"``, ``"lpips" != y``, ``x in ("stlpips", …)``, and
#: DISTS recognised by its components (``{"texture", "structure"} <= …``).
_NAME = r"""["'](lpips|stlpips|dists)["']"""
BRANCH_ON_A_NAME = re.compile(rf"""(==|!=)\s*{_NAME}|{_NAME}\s*(==|!=)|\bin\s*[(\[{{]\s*{_NAME}"""
                              r"""|["']texture["']\s*,\s*["']structure["']\s*}\s*<=""")
#: The metric-configuration shapes that :class:`lpips_core.spec.MetricSpec` replaced, and the
#: successor ids' spellings; none may come back (in code, tests, benchmarks or documents). Each
#: name is written in two pieces here, so that a plain ``git grep`` for them finds nothing at all.
RETIRED = re.compile("|".join(("Metric" "Variant", "SUCC" "ESSORS", "metric" "_key", "App" "Config",
                               "successor" "_label", "HIGHER_IS" "_BETTER", "CLASSIC" "_LABELS", "CLASSIC" "_KEYS",
                               "REAL_NET" "_LABELS", "[\"']stlpips" ":")))


def test_no_branch_on_a_metric_name_outside_the_registry():
    """Only metric_registry knows learned metrics by name; everything else goes through the
    protocol and :class:`~lpips_core.spec.MetricSpec` (the registry's table says what a metric has)."""
    files = [*(REPO / "lpips_core").rglob("*.py"), *(REPO / "lpips_explorer").rglob("*.py"),
             *(REPO / "app_pages").glob("*.py"), REPO / "app.py", *(REPO / "ui").rglob("*.py"),
             *(REPO / "benchmarks").glob("*.py")]
    hits = [f"{f.relative_to(REPO)}:{n}: {line.strip()}" for f in files if f.name != "metric_registry.py"
            for n, line in enumerate(f.read_text().splitlines(), 1) if BRANCH_ON_A_NAME.search(line)]
    assert hits == []


@pytest.mark.parametrize("line, branches", [
    ('if metric == "dists":', True), ("elif 'stlpips' != spec.metric:", True), ('if m in ("lpips", "x"):', True),
    ('staged = {k: r for k, r in out.items() if {"texture", "structure"} <= set(r)}', True),
    ('spec = MetricSpec("lpips", net="vgg")', False), ('parse_specs("lpips-alex,dists-vgg")', False),
    ("if spec.metric != DEFAULT_SPEC.metric:", False),
])
def test_the_branch_pattern_finds_what_it_must(line, branches):
    assert bool(BRANCH_ON_A_NAME.search(line)) == branches


def test_one_metric_configuration_type():
    """:class:`~lpips_core.spec.MetricSpec` is the only metric-configuration type: the shapes it
    replaced appear nowhere in the tracked files (this test's own patterns excepted)."""
    assert RETIRED.search('p.add_argument("--others", default=["stlpips' ':alex"])') and RETIRED.search("ui.SUCC" "ESSORS")
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    here = Path(__file__).resolve()
    hits = []
    for name in files:
        path = REPO / name
        if path.resolve() == here or path.suffix not in (".py", ".md", ".sh", ".toml", ".json", ".txt") \
                or not path.is_file():
            continue
        hits += [f"{name}:{n}" for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
                 if RETIRED.search(line)]
    assert hits == []


def test_between_layers_calls_its_hook_after_each_layer_and_can_end_a_pass():
    """``backbones.between_layers``: the hook runs after each of AlexNet's 12 layers, in this
    thread only, not outside the block; an exception it raises ends the pass, and the reference
    cache keeps nothing half-computed (the Debug page ends replaced runs this way)."""
    from lpips_core.backbones import between_layers

    model = registry.build("lpips", "alex", device="cpu")
    model.ref_cache = FeatureCache(max_bytes=1 << 30)
    x = _churn_inputs(1)[0]
    calls: list[str] = []
    with between_layers(lambda: calls.append(threading.current_thread().name)):
        model.features(x)
        other = threading.Thread(target=model.features, args=(x,), name="other")
        other.start()
        other.join()
    assert calls == [threading.current_thread().name] * 12
    model.features(x)
    assert len(calls) == 12

    class Replaced(BaseException):
        pass

    def stop() -> None:
        raise Replaced

    with pytest.raises(Replaced), between_layers(stop):
        model.reference_features(x)
    assert len(model.ref_cache) == 0
    model.reference_features(x)
    assert len(model.ref_cache) == 1
