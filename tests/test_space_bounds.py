"""Bounds of LPIPS space and of ``diversity --sample`` ("One reader, one writer", rows 6 and 12).

- ``k`` above the pool size is capped (library and CLI): the whole pool, sorted, at the cost of
  ``k`` = the pool size; the CLI's JSON keeps ``k`` as asked and adds ``k_used``.
- ``--proj-dim`` / ``build_index(dim=...)`` is capped at the embedding's width, and the random
  projection's working memory stays within the budget (blocks of at most 32 MiB).
- FAISS factory strings are checked before FAISS sees them (``HNSW0`` aborted the process);
  a ``RuntimeError`` from FAISS is a one-line ``ValueError``.
- Bad library arguments are ``ValueError``/``TypeError`` with the fix in the message.
- ``--sample K`` counts toward the all-pairs bound as ``min(K, all pairs)``, refused before any
  pair is scored.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import REPO
from lpips_core import metric_registry, space
from lpips_core.__main__ import main
from lpips_core.datasets.pairs import MAX_ALL_PAIRS, check_pair_count

faiss = pytest.importorskip("faiss")


def _pngs(folder, n: int, side: int, seed: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(folder / f"img{i:04d}.png")


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bounds")
    _pngs(root / "pool", 6, 64, seed=1)
    _pngs(root / "q", 2, 64, seed=2)
    return root / "q", root / "pool"


@pytest.fixture(scope="module")
def embs(dirs):
    model = metric_registry.build("lpips", "alex", device="cpu")
    q, pool = dirs
    return space.embed(model, q), space.embed(model, pool)


def _fake(n: int, d: int, seed: int = 0) -> space.Embedding:
    """An embedding of ``n`` random rows of ``d`` floats (no network): for the index's checks."""
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    norms = (x.astype(np.float64) ** 2).sum(1)
    layout = space.EmbeddingLayout((("x", d, 1, 1),))
    return space.Embedding([f"r{i:03d}" for i in range(n)], [(0, x)], norms, [f"c{i}" for i in range(n)], layout, {})


def _cli(capfd, *args) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code
    out, err = capfd.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- k capped at the pool size
def test_k_above_the_pool_gives_the_whole_pool_sorted_at_its_cost(embs):
    q, pool = embs
    whole = space.nearest(q, pool, k=len(pool))
    tracemalloc.start()
    try:
        start = time.perf_counter()
        big = space.nearest(q, pool, k=200_000_000)
        took = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert big.indices.shape == (len(q), len(pool))  # was (Q, 200,000,000): 3.2 GB a query array
    assert (big.indices == whole.indices).all() and (big.distances == whole.distances).all()
    assert all(sorted(row.tolist()) == list(range(len(pool))) for row in big.indices)
    assert (np.diff(big.distances, axis=1) >= 0).all()
    assert peak < 16 << 20 and took < 10, (peak, took)
    # the query set is the pool: the whole pool minus the self-match
    own = space.nearest(pool, pool, k=10 ** 9)
    assert own.indices.shape == (len(pool), len(pool) - 1) and (own.indices >= 0).all()
    assert (own.indices == space.nearest(pool, pool, k=len(pool) - 1).indices).all()
    assert all(i not in row for i, row in enumerate(own.indices))
    # the approximate search too (a Flat index over 6 rows finds them all)
    index = space.build_index(pool, dim=16)
    got = index.search(q, k=10 ** 9)
    assert got.indices.shape == (len(q), len(pool))
    assert (got.indices == whole.indices).all() and np.abs(got.distances - whole.distances).max() <= 1e-9
    mine = index.search(pool, k=10 ** 9)
    assert mine.indices.shape == (len(pool), len(pool) - 1) and (mine.indices >= 0).all()


def test_cli_json_says_the_k_asked_and_the_k_used(dirs, capfd):
    q, pool = dirs
    code, out, err = _cli(capfd, "neighbours", q, pool, "--k", "200000000", "--net", "alex", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["config"]["k"] == 200_000_000 and got["config"]["k_used"] == 6
    assert [len(x["neighbours"]) for x in got["queries"]] == [6, 6]
    code, out, err = _cli(capfd, "neighbours", pool, pool, "--k", "1000000000", "--net", "alex", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["config"]["k"] == 10 ** 9 and got["config"]["k_used"] == 5
    assert [len(x["neighbours"]) for x in got["queries"]] == [5] * 6  # self-matches left out
    code, out, err = _cli(capfd, "neighbours", q, pool, "--k", "3", "--net", "alex", "--json")
    assert code == 0 and "k_used" not in json.loads(out)["config"]  # only when it differs


_MEASURE = """
import json, resource, sys, time
from lpips_core.__main__ import main
q, pool = sys.argv[1:3]
out = {}
for name, extra in (("k3", ["--k", "3"]), ("k200M", ["--k", "200000000"]),
                    ("proj20000", ["--k", "3", "--approximate", "--proj-dim", "20000", "--memory-mb", "256"])):
    t = time.perf_counter()
    rc = main(["neighbours", q, pool, "--net", "alex", "--json"] + extra)
    out[name] = {"rc": rc, "s": time.perf_counter() - t, "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
print("MEASURE " + json.dumps(out))
"""


def test_the_cli_cases_of_the_report_stay_small_in_a_subprocess(dirs):
    """Peak RSS (monotonic, so measured in order): k = 3, then k = 200,000,000 (was 148 s and
    6.8 GB here with 2 queries), then a 20,000-d random projection under --memory-mb 256 (was
    28 s and 5.6 GB: a 31,872 × 20,000 block of its axes at once)."""
    q, pool = dirs
    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(q), str(pool)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    line = [x for x in proc.stdout.splitlines() if x.startswith("MEASURE ")]
    assert proc.returncode == 0 and line, proc.stderr[-2000:]
    m = json.loads(line[0][len("MEASURE "):])
    assert all(v["rc"] == 0 for v in m.values()), m
    base = m["k3"]["peak_kb"]
    assert m["k200M"]["peak_kb"] - base < 100_000 and m["k200M"]["s"] < 30, m
    assert m["proj20000"]["peak_kb"] - base < 300_000 and m["proj20000"]["s"] < 60, m


# --------------------------------------------------------------------------- the projection's dimensions and memory
def test_proj_dim_is_capped_at_the_embedding_width_and_pca_at_the_sample(embs, dirs, capfd):
    wide = _fake(10, 40)
    index = space.build_index(wide, dim=10 ** 6)
    assert index.projection.dim == 40 and index.index.d == 40
    assert space.fit_projection(wide, 10 ** 6, method="random").dim == 40
    _, pool = embs
    pca = space.fit_projection(pool, 16, method="pca")  # 6 images span 5 axes
    assert pca.dim == 5 and pca.axes.shape == (pool.dim, 5) and pca.apply(pool).shape == (6, 5)
    index = space.build_index(pool, dim=16, method="pca")
    assert index.projection.dim == index.index.d == 5
    q, pooldir = dirs
    code, out, err = _cli(capfd, "neighbours", q, pooldir, "--k", "3", "--net", "alex", "--json", "--approximate",
                          "--projection", "pca", "--proj-dim", "20000")
    assert code == 0, err
    c = json.loads(out)["config"]
    assert c["proj_dim"] == 20000 and c["proj_dim_used"] == 5 and "over a 5-d pca projection" in c["method"]


def test_the_random_projection_works_in_blocks_within_the_budget():
    budget = 256 << 20
    p = space.Projection("random", 20000)
    chunk, rows = p.plan(31872, budget)  # the report's case: AlexNet at 64 px, --proj-dim 20000
    assert 4 * chunk * 20000 <= 32 << 20  # one seeded block of the axes: 419 rows, 33.5 MB (was 31,872 rows, 2.5 GB)
    assert 4 * chunk * 20000 + 4 * rows * (chunk + 20000) <= budget
    with pytest.raises(ValueError, match=r"over the memory budget of 16\.0 MiB: raise the budget to at least 33 MiB "
                                         r"\(--memory-mb 33\) or project to fewer dimensions"):
        p.plan(31872, 16 << 20)
    # the axes depend on (seed, dim) only: any budget gives the same coordinates
    emb = _fake(7, 3000)
    for dim in (16, 700):
        ref = space.Projection("random", dim, seed=3).apply(emb)
        small = space.Projection("random", dim, seed=3).apply(emb, memory_budget=12 << 20)
        assert np.allclose(ref, small, rtol=1e-5, atol=1e-6)
    # up to 256 dimensions the axes are the ones made before blocks were sized (32,768 rows a seed)
    x = torch.from_numpy(emb.rows(0, 7))
    old = torch.randn((3000, 16), generator=torch.Generator().manual_seed(3 * 1_000_003)) / math.sqrt(16)
    assert np.allclose(space.Projection("random", 16, seed=3).apply(emb), (x @ old).numpy(), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- FAISS factory strings
BAD_FACTORIES = [
    ("HNSW0", "HNSW needs 2 ≤ M ≤ 256 links per node, got 0"),  # aborted the process (rc 134)
    ("HNSW1", "HNSW needs 2 ≤ M ≤ 256 links per node, got 1"),  # a segmentation fault (rc 139)
    ("HNSW257,Flat", "got 257"),
    ("IVF0,Flat", "IVF needs 1 ≤ n ≤ 20 lists"),
    ("IVF21,Flat", "IVF needs 1 ≤ n ≤ 20 lists"),
    ("IVF2,PQ4x8", "trains 2^8 = 256 centroids"),
    ("PQ0", "PQ needs m to divide the 8 dimensions"),
    ("PQ3", "PQ needs m to divide the 8 dimensions"),
    ("PQ4x0", "PQ needs 1 ≤ b ≤ 16 bits per code, got 0"),  # a floating-point exception (rc 136)
    ("PQ4x17", "PQ needs 1 ≤ b ≤ 16 bits per code, got 17"),
    ("PQ4", "use fewer bits (PQ4x4) or Flat"),
    ("flat", "unsupported FAISS factory 'flat'"),
    ("Flat ", "unsupported FAISS factory 'Flat '"),
    ("", "unsupported FAISS factory ''"),
    ("IVF2", "unsupported"),
    ("HNSW32,PQ4", "unsupported"),
    ("OPQ4,PQ4", "unsupported"),
    ("HNSW٣٢", "unsupported"),  # Arabic-Indic digits: not FAISS's
    ("x" * 500, "unsupported FAISS factory 'xxx"),
]


@pytest.mark.parametrize("factory, message", BAD_FACTORIES, ids=[f[:20] for f, _ in BAD_FACTORIES])
def test_a_bad_factory_is_one_line_before_faiss_sees_it(factory, message, monkeypatch):
    def never(*args):
        raise AssertionError(f"faiss.index_factory called with {args}")

    monkeypatch.setattr(faiss, "index_factory", never)
    with pytest.raises(ValueError) as info:
        space.build_index(_fake(20, 64), dim=8, factory=factory)
    text = str(info.value)
    assert message in text and "\n" not in text and len(text) < 400, text


@pytest.mark.parametrize("factory", [None, 32, b"Flat", ["Flat"]])
def test_a_factory_that_is_not_a_string_is_a_type_error(factory, monkeypatch):
    monkeypatch.setattr(faiss, "index_factory", lambda *a: pytest.fail("faiss called"))
    with pytest.raises(TypeError, match="factory must be a FAISS index_factory string such as 'Flat' or 'HNSW32'"):
        space.build_index(_fake(20, 64), dim=8, factory=factory)


@pytest.mark.parametrize("factory", ["Flat", "HNSW2", "HNSW32,Flat", "IVF1,Flat", "IVF4,Flat", "PQ2x4",
                                     "PQ8x3", "IVF2,PQ2x4"])
def test_the_documented_factories_build_and_search(factory):
    pool = _fake(20, 64)
    index = space.build_index(pool, dim=8, factory=factory, oversample=2)
    exact = space.nearest(pool, pool, k=3)
    got = index.search(pool, k=3)
    assert got.indices.shape == (20, 3) and index.index.d == 8
    found = got.indices >= 0
    assert found[:, 0].all()  # every query has a candidate (IVF probes one list: maybe fewer than 3)
    # re-ranked: found neighbours carry their exact distances
    for q in range(20):
        d = {int(j): v for j, v in zip(exact.indices[q], exact.distances[q])}
        for j, v in zip(got.indices[q][found[q]], got.distances[q][found[q]]):
            if int(j) in d:
                assert abs(v - d[int(j)]) <= 1e-9


def test_a_runtime_error_from_faiss_is_a_one_line_value_error(monkeypatch):
    class Refusing:
        is_trained = False
        d = 8

        def train(self, v):
            raise RuntimeError("Error in void faiss::Clustering::train at Clustering.cpp:66: Error: 'nx >= k' failed\n"
                               "second line")

    monkeypatch.setattr(faiss, "index_factory", lambda d, f: Refusing())
    with pytest.raises(ValueError, match=r"^FAISS refused the index \(train\): Error in void faiss::Clustering::train "
                                         r"at Clustering.cpp:66: Error: 'nx >= k' failed$"):
        space.build_index(_fake(20, 64), dim=8)
    monkeypatch.undo()  # the real FAISS again
    built = space.build_index(_fake(20, 64), dim=8)

    class Broken:
        def search(self, v, k):
            raise RuntimeError("Error in search: Error: 'k > 0' failed")

    built.index = Broken()
    with pytest.raises(ValueError, match=r"^FAISS refused the index \(search\): Error in search"):
        built.search(built.pool, k=2)


# --------------------------------------------------------------------------- bad library arguments
def test_bad_library_arguments_say_the_fix():
    pool = _fake(20, 64)
    other = _fake(3, 64, seed=1)
    index = space.build_index(pool, dim=8)
    for k in (0, -1, True):
        with pytest.raises(ValueError, match=r"k must be an integer ≥ 1 \(the neighbours per query, e\.g\. k=5"):
            index.search(pool, k=k)  # k=0 was a bare AssertionError from FAISS
        with pytest.raises(ValueError, match=r"k must be an integer ≥ 1 \(the neighbours per query, e\.g\. k=5"):
            space.nearest(pool, pool, k=k)
    for k in (1.5, "3", None):
        with pytest.raises(TypeError, match="k must be an integer"):
            index.search(pool, k=k)
        with pytest.raises(TypeError, match="k must be an integer"):
            space.nearest(pool, pool, k=k)
    with pytest.raises(ValueError, match=r"margin must be an integer ≥ 0"):
        space.nearest(pool, pool, k=2, margin=-1)
    with pytest.raises(ValueError, match="exclude_self needs the query set to be the pool"):
        index.search(other, k=2, exclude_self=True)
    for bad in (0, -4):
        with pytest.raises(ValueError, match=r"oversample must be an integer ≥ 1 \(candidates re-ranked per "
                                             r"neighbour, e\.g\. oversample=4\)"):
            space.build_index(pool, dim=8, oversample=bad)
    index.oversample = 0  # a field set by hand
    with pytest.raises(ValueError, match="oversample must be an integer ≥ 1"):
        index.search(pool, k=2)
    for bad in (0, -1):
        with pytest.raises(ValueError, match=r"dim must be an integer ≥ 1 \(the projection's dimensions, e\.g\. "
                                             r"dim=256\)"):
            space.build_index(pool, dim=bad)
        with pytest.raises(ValueError, match="dim must be an integer ≥ 1"):
            space.fit_projection(pool, bad, method="random")
    with pytest.raises(TypeError, match="dim must be an integer"):
        space.build_index(pool, dim=2.5)
    with pytest.raises(ValueError, match="method must be 'pca' or 'random'"):
        space.build_index(pool, method="umap")
    with pytest.raises(ValueError, match=r"sample must be an integer ≥ 1"):
        space.build_index(pool, method="pca", sample=0)
    with pytest.raises(ValueError, match=r"PCA needs a sample of at least 2 images, got 1 .*use method='random'"):
        space.build_index(pool, method="pca", sample=1)
    with pytest.raises(ValueError, match=r"seed must be an integer ≥ 0"):
        space.build_index(pool, seed=-1)
    with pytest.raises(ValueError, match=r"memory_budget must be an integer ≥ 1048576"):
        space.build_index(pool, dim=8, memory_budget=1000)


# --------------------------------------------------------------------------- --sample counts toward the pair bound
@pytest.fixture(scope="module")
def many(tmp_path_factory):
    d = tmp_path_factory.mktemp("many")
    _pngs(d, 500, 16, seed=5)  # 124,750 pairs
    return d


@pytest.mark.parametrize("sample, start", [
    ("1000000000000", "error: all pairs of 500 images are 124,750 pairs, and --sample 1,000,000,000,000 takes all "
                      "of them: more than the 100,000 pairs scored one by one (about 1 minute at ~0.5 ms a pair, "
                      "before any result); pass --sample K with K ≤ 100,000 to score a seeded random sample of K "
                      "pairs (e.g. --sample 100000)\n"),
    ("124750", "error: all pairs of 500 images are 124,750 pairs, and --sample 124,750 takes all of them"),
    ("100001", "error: --sample 100,001 takes 100,001 of the 124,750 pairs of 500 images: more than the 100,000 "
               "pairs scored one by one"),
    (None, "error: all pairs of 500 images are 124,750 pairs, more than the 100,000 scored without --sample "
           "(about 1 minute at ~0.5 ms a pair, before any result); pass --sample K"),
])
def test_a_sample_counts_toward_the_pair_bound_before_any_scoring(many, sample, start, capfd, monkeypatch):
    from lpips_core.datasets import score

    monkeypatch.setattr(score, "score_pairs", lambda *a, **k: pytest.fail("pairs scored past the bound"))
    t = time.perf_counter()
    code, out, err = _cli(capfd, "diversity", many, "--metrics", "mse", "--workers", "0",
                          *(("--sample", sample) if sample else ()))
    assert code == 2 and out == "" and err.startswith(start) and err.count("\n") == 1, err
    assert time.perf_counter() - t < 10


def test_a_sample_under_the_bound_still_runs(many, capfd):
    code, out, err = _cli(capfd, "diversity", many, "--metrics", "mse", "--workers", "0", "--sample", "300",
                          "--json")
    assert code == 0, err
    assert json.loads(out)["n"] == 300


def test_check_pair_count_takes_the_smaller_of_the_sample_and_all_pairs():
    check_pair_count(124_750, per_pair_seconds=0.001, sample=MAX_ALL_PAIRS)
    check_pair_count(10, per_pair_seconds=1.0, sample=10 ** 12, limit=10)  # all 10 pairs: within the bound
    with pytest.raises(ValueError, match="takes all of them"):
        check_pair_count(11, per_pair_seconds=1.0, sample=10 ** 12, limit=10)
    for bad in (0, -3, True):
        with pytest.raises(ValueError, match="sample must be a positive integer"):
            check_pair_count(11, per_pair_seconds=1.0, sample=bad, limit=10)
