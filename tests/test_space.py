"""lpips_core.space: φ, the blocked Gram matrix, all pairs, exact neighbours, shards, the interval.

Oracles: the engine's per-pair ``model.compare`` (every Gram-derived distance within 1e-5), the
reference ``lpips`` / ``stlpips`` packages (built on our weights by :mod:`lpips_core.testing`), and
brute-force searches over per-pair values. AlexNet cases run in the fast tier; their VGG16 twins
are ``slow``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from PIL import Image

from datasets_shared import distort, image, save
from lpips_core import LPIPS, space
from lpips_core.spec import parse_spec

TOL = 1e-5


def _set(root, n=7, side=64, seed=0, dup=True):
    """``n`` smooth random images (some are mild distortions of others, so distances spread), plus
    an exact copy of image 2 under another name (a tie) when ``dup``."""
    rng = np.random.default_rng(seed)
    base = [image(rng, side, side) for _ in range(max(2, n // 2))]
    imgs = base + [distort(rng, base[i % len(base)], 6 + 4 * i) for i in range(n - len(base))]
    root.mkdir(parents=True, exist_ok=True)
    for i, arr in enumerate(imgs):
        save(arr, root / f"img{i:02d}.png")
    if dup:
        save(imgs[2], root / "zz-copy-of-img02.png")
    return root


def _inputs(root):
    names, _ = space.image_files(root)
    arrs = [np.asarray(Image.open(root / n).convert("RGB"), dtype=np.float32) / 255 for n in names]
    return names, torch.from_numpy(np.stack(arrs).transpose(0, 3, 1, 2).copy()) * 2 - 1


def _per_pair(model, x):
    n = x.shape[0]
    d = np.zeros((n, n))
    for i in range(n):
        d[i] = model.compare(x[i:i + 1], x).total.double().numpy()
    return d


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return _set(tmp_path_factory.mktemp("space") / "set")


CONFIGS = [pytest.param(net, ver, lin, marks=[] if net == "alex" else [pytest.mark.slow],
                        id=f"{net}-{ver}-{'lin' if lin else 'baseline'}")
           for net in ("alex", "vgg") for ver in ("0.1", "0.0") for lin in (True, False)]


@pytest.mark.parametrize("net, version, lin", CONFIGS)
def test_every_gram_distance_equals_the_per_pair_engine(folder, net, version, lin):
    model = LPIPS(net, version, lin, device="cpu")
    emb = space.embed(model, folder, spec=parse_spec(f"lpips-{net}-{version}-{'lin' if lin else 'baseline'}"))
    d = space.pairwise_distances(emb)
    names, x = _inputs(folder)
    assert emb.names == names
    want = _per_pair(model, x)
    assert np.abs(d - want).max() <= TOL
    assert (d == d.T).all() and (np.diag(d) == 0).all() and (d >= 0).all()
    assert d[names.index("img02.png"), names.index("zz-copy-of-img02.png")] == 0.0
    # and the reference package, for the same configuration (its lpips=lin flag)
    from lpips_core.testing import reference_lpips

    ref = reference_lpips(net, version, lin)
    with torch.no_grad():
        r = ref(x[:1].expand(len(x), -1, -1, -1), x).flatten().double().numpy()
    assert np.abs(d[0] - r).max() <= TOL


def test_phi_is_the_identity_of_the_issue(golden):
    """``‖φ(x) − φ(y)‖²`` summed in float64 equals ``compare`` for the reference repository's
    examples (64 px), and φ has the layout the docs state (C·H·W per layer, concatenated)."""
    model = LPIPS("alex", device="cpu")
    x = torch.stack([torch.from_numpy(golden[k]).permute(2, 0, 1) for k in ("ex_ref", "ex_p0", "ex_p1")]) * 2 - 1
    v, layout = space.phi(model, x)
    assert v.dtype == torch.float32 and v.shape == (3, layout.dim)
    assert [c for _, c, _, _ in layout.layers] == [64, 192, 384, 256, 256]
    assert layout.dim == sum(c * h * w for _, c, h, w in layout.layers)
    d = ((v[0].double() - v[1:].double()) ** 2).sum(1)
    want = model.compare(x[:1], x[1:]).total.double()
    assert torch.allclose(d, want, atol=1e-6, rtol=0)


def test_an_embedding_at_256_px_has_the_dimension_the_docs_give():
    model = LPIPS("alex", device="cpu")
    _, layout = space.phi(model, torch.zeros(1, 3, 256, 256))
    assert layout.dim == 640_128  # 64·63² + 192·31² + 384·15² + 2·256·15²


def test_has_embedding():
    assert space.has_embedding("lpips") and space.has_embedding("lpips-vgg-0.0-baseline")
    assert space.has_embedding("lpips-squeeze") and space.has_embedding("stlpips-alex")
    assert not space.has_embedding("dists") and not space.has_embedding("ssim")
    assert not space.has_embedding(parse_spec("mse"))


def test_negative_weights_are_refused():
    model = LPIPS("alex", device="cpu")
    model.lin2[5] = -0.01
    with pytest.raises(ValueError, match="layer relu3 have 1 negative"):
        space.phi(model, torch.zeros(1, 3, 64, 64))


def test_dists_is_refused_with_the_fallback_named():
    from lpips_core.dists import DISTS

    with pytest.raises(TypeError, match="DISTS is not a Euclidean distance: use the per-pair path"):
        space.check_euclidean(DISTS(device="cpu"))


def test_stlpips_is_euclidean_too(folder):
    """ST-LPIPS is LPIPS's recipe on another backbone, with non-negative weights: its Gram distances
    equal the reference ``stlpips`` package's per-pair values."""
    from lpips_core.stlpips import STLPIPS
    from lpips_core.testing import reference_stlpips

    model = STLPIPS("alex", device="cpu")
    d = space.pairwise_distances(space.embed(model, folder))
    _, x = _inputs(folder)
    ref = reference_stlpips("alex")
    with torch.no_grad():
        r = ref(x[:1].expand(3, -1, -1, -1), x[:3]).flatten().double().numpy()
    assert np.abs(d[0, :3] - r).max() <= TOL


def test_neighbours_equal_a_brute_force_per_pair_search(tmp_path):
    """Queries against a pool: the k nearest by the per-pair engine, ties (a pool image copied under
    two names) broken by name, distances within 1e-5."""
    model = LPIPS("alex", device="cpu")
    pool = _set(tmp_path / "pool", n=8, seed=1, dup=False)
    q = _set(tmp_path / "q", n=3, seed=2, dup=False)
    for name in ("img03.png", "img05.png"):  # two copies of pool images among the queries' neighbours
        (pool / f"b-{name}").write_bytes((pool / name).read_bytes())
    (q / "img00.png").write_bytes((pool / "img05.png").read_bytes())  # a query that is in the pool
    pe, qe = space.embed(model, pool), space.embed(model, q)
    got = space.nearest(qe, pe, k=4)
    pnames, px = _inputs(pool)
    qnames, qx = _inputs(q)
    for i in range(len(qnames)):
        vals = model.compare(qx[i:i + 1], px).total.double().numpy()
        want = sorted(range(len(pnames)), key=lambda j: (vals[j], pnames[j]))[:4]
        assert [pnames[j] for j in got.indices[i]] == [pnames[j] for j in want]
        assert np.abs(got.distances[i] - vals[want]).max() <= TOL
    first = got.to_json(qnames, pnames)[0]
    assert first["query"] == "img00.png"
    assert [n["name"] for n in first["neighbours"][:2]] == ["b-img05.png", "img05.png"]  # a tie: by name
    assert [n["distance"] for n in first["neighbours"][:2]] == [0.0, 0.0]


def test_neighbours_within_one_folder_exclude_self_not_copies(folder):
    model = LPIPS("alex", device="cpu")
    emb = space.embed(model, folder)
    got = space.nearest(emb, emb, k=3)
    names, x = _inputs(folder)
    want = _per_pair(model, x)
    for i in range(len(names)):
        order = sorted((j for j in range(len(names)) if j != i), key=lambda j: (want[i, j], names[j]))[:3]
        assert list(got.indices[i]) == order
    i, j = names.index("img02.png"), names.index("zz-copy-of-img02.png")
    assert got.indices[i][0] == j and got.indices[j][0] == i and got.distances[i][0] == 0.0
    # k larger than the pool: capped at the pool less the left-out self-match
    big = space.nearest(emb, emb, k=len(names) + 2)
    assert big.indices.shape == (len(names), len(names) - 1) and (big.indices >= 0).all()


def test_diversity_tile_by_tile_equals_the_matrix(folder):
    """The streamed summary (row sums, merged moments; no N × N matrix) equals the one of the full
    matrix, also with many small tiles."""
    emb = space.embed(LPIPS("alex", device="cpu"), folder)
    want = space.jackknife_interval(space.pairwise_distances(emb))
    for budget in (space.DEFAULT_BUDGET, 1 << 20):
        got = space.diversity(emb, memory_budget=budget)
        assert got["mean"] == pytest.approx(want["mean"], rel=1e-12)
        assert got["std"] == pytest.approx(want["std"], rel=1e-9)
        assert got["se"] == pytest.approx(want["se"], rel=1e-9)
        assert got["ci95"] == pytest.approx(want["ci95"], rel=1e-9)
        assert (got["images"], got["pairs"]) == (8, 28)


def test_small_tiles_give_the_same_numbers(folder, monkeypatch):
    """Tiles of 3 rows and chunks of 256 columns (the default plan puts 8 images in one tile): the
    matrix, the streamed summary and the neighbours all equal the one-tile results."""
    model = LPIPS("alex", device="cpu")
    emb = space.embed(model, folder)
    big, big_stats, big_nn = space.pairwise_distances(emb), space.diversity(emb), space.nearest(emb, emb, k=3)
    from lpips_core.space import distances, neighbours

    for module in (distances, neighbours):  # the tile plan of all pairs, diversity, gram and nearest
        monkeypatch.setattr(module, "_plan", lambda n, m, dim, budget: (3, 256))
    small = space.pairwise_distances(emb)
    assert np.abs(big - small).max() <= 1e-6 and (small == small.T).all()  # float32 GEMMs of other shapes
    assert space.diversity(emb)["ci95"] == pytest.approx(big_stats["ci95"], rel=1e-6)
    g = space.gram(emb)
    assert np.allclose(np.diag(g), emb.norms, rtol=1e-6, atol=0)  # float32 products, float64 sums
    nn = space.nearest(emb, emb, k=3)
    assert (nn.indices == big_nn.indices).all() and np.abs(nn.distances - big_nn.distances).max() <= 1e-9
    q = space.embed(model, folder)
    cross = space.nearest(q, emb, k=2)  # another embedding of the same images: each finds itself first
    assert (cross.indices[:, 0] == np.array([0, 1, 2, 3, 4, 5, 6, 2])).all() and (cross.distances[:, 0] == 0).all()


def test_streamed_shards_join_to_the_in_memory_embedding(folder, tmp_path):
    model = LPIPS("alex", device="cpu")
    mem = space.embed(model, folder)
    out = tmp_path / "emb"
    for i in range(3):
        space.embed(model, folder, out=out, shard=(i, 3))
    joined = space.open_embedding(out)
    assert joined.names == mem.names and len(joined.blocks) == 3
    # other batches (a shard's images go through the network together): equal to float rounding
    assert np.abs(joined.rows(0, len(joined)) - mem.rows(0, len(mem))).max() <= 1e-6
    assert np.abs(space.pairwise_distances(joined) - space.pairwise_distances(mem)).max() <= 1e-6
    m = json.loads((out / "embedding-00001-of-00003.json").read_text())
    assert m["format"] == space.FORMAT and m["config"]["spec"] == "lpips-alex-0.1-lin-[-1,1]"
    assert m["input_size"] == [64, 64] and m["dim"] == mem.dim and m["images_total"] == len(mem)
    assert m["versions"]["torch"] == torch.__version__.split("+")[0] and m["model"]["weights"] == model.weights
    assert len(m["model"]["channel_weights_sha256"]) == 64
    assert all(len(f["blake2b"]) == 32 and f["bytes"] > 0 for f in m["files"])
    assert np.load(out / m["phi"]["file"], mmap_mode="r").dtype == np.float32
    (out / "embedding-00002-of-00003.json").unlink()
    with pytest.raises(ValueError, match=r"lacks shard\(s\) \[2\] of 3"):
        space.open_embedding(out)
    with pytest.raises(ValueError, match="exists"):
        space.embed(model, folder, out=out, shard=(0, 3))


def test_unreadable_files_are_skipped_and_mixed_sizes_refused(tmp_path):
    model = LPIPS("alex", device="cpu")
    root = _set(tmp_path / "s", n=4, dup=False)
    (root / "broken.png").write_bytes(b"not a png")
    out = tmp_path / "emb"
    emb = space.embed(model, root, out=out)
    assert "broken.png" not in emb.names and len(emb) == 4
    assert emb.skipped[0]["name"] == "broken.png" and "broken.png" in emb.skipped[0]["error"]
    again = space.open_embedding(out)  # the unused row was cut from the .npy file
    assert np.load(out / "phi-00000-of-00001.npy", mmap_mode="r").shape == (4, emb.dim)
    assert np.array_equal(again.rows(0, 4), emb.rows(0, 4))
    save(image(np.random.default_rng(9), 48, 64), root / "wide.png")
    with pytest.raises(ValueError, match=r"wide.png is 64×48 px but img00.png is 64×64 px.*--size"):
        space.embed(model, root)
    emb = space.embed(model, root, spec="lpips-alex@64")
    assert len(emb) == 5 and emb.manifest["input_size"] == [64, 64]


def test_in_memory_embedding_over_budget_is_refused(folder):
    with pytest.raises(ValueError, match="over the memory budget"):
        space.embed(LPIPS("alex", device="cpu"), folder, memory_budget=100_000)


def test_jackknife_interval_is_the_leave_one_image_out_formula():
    rng = np.random.default_rng(0)
    n = 9
    shift = rng.normal(0, 1, n)  # image-level effects: pairs sharing an image are correlated
    d = np.abs(shift[:, None] + shift[None, :]) + rng.random((n, n)) * 0.1
    d = np.triu(d, 1) + np.triu(d, 1).T
    got = space.jackknife_interval(d)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    loo = np.array([np.mean([d[i, j] for i, j in pairs if k not in (i, j)]) for k in range(n)])
    se = math.sqrt((n - 1) / n * ((loo - loo.mean()) ** 2).sum())
    from scipy import stats

    half = stats.t.ppf(0.975, n - 1) * se
    assert got["mean"] == pytest.approx(np.mean([d[i, j] for i, j in pairs]), abs=1e-12)
    assert got["se"] == pytest.approx(se, rel=1e-12)
    assert got["ci95"] == pytest.approx([got["mean"] - half, got["mean"] + half], rel=1e-12)
    naive = stats.t.ppf(0.975, len(pairs) - 1) * np.std([d[i, j] for i, j in pairs], ddof=1) / math.sqrt(len(pairs))
    assert half > naive  # the pairs are not independent: the honest interval is wider
    assert got["pairs"] == 36 and got["images"] == 9
    with pytest.raises(ValueError, match="at least 2 images"):
        space.jackknife_interval(np.zeros((1, 1)))


def test_approximate_index_recall_and_exact_rerank(folder):
    model = LPIPS("alex", device="cpu")
    emb = space.embed(model, folder)
    exact = space.nearest(emb, emb, k=3)
    for method in ("pca", "random"):
        index = space.build_index(emb, dim=16, method=method, oversample=3)
        approx = index.search(emb, k=3)
        assert space.recall_at_k(approx, exact) == 1.0  # 8 images: every other one is a candidate
        assert (approx.indices == exact.indices).all()
        assert np.abs(approx.distances - exact.distances).max() <= 1e-12
    assert space.recall_at_k(exact, exact) == 1.0


def test_pca_projection_keeps_distances_of_the_sample_exactly(folder):
    """With as many axes as the sample spans, the PCA projection is an isometry on the sample:
    projected squared distances equal the exact ones (the Gram trick, no D × D covariance)."""
    emb = space.embed(LPIPS("alex", device="cpu"), folder)
    proj = space.fit_projection(emb, dim=16, method="pca")
    v = proj.apply(emb).astype(np.float64)
    got = ((v[:, None] - v[None]) ** 2).sum(-1)
    assert np.abs(got - space.pairwise_distances(emb)).max() <= 1e-5
    r = space.fit_projection(emb, dim=8, method="random").apply(emb)
    assert r.shape == (8, 8) and np.array_equal(r, space.fit_projection(emb, dim=8, method="random").apply(emb))
    with pytest.raises(ValueError, match="method must be 'pca' or 'random'"):
        space.fit_projection(emb, 4, method="umap")


@pytest.mark.slow  # a local Ray with 2 actors (full tier)
def test_ray_embeds_shards_that_join_to_the_single_process_embedding(folder, tmp_path):
    import ray  # the [ray] extra, part of the test extras

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        emb = space.embed_ray(folder, "lpips-alex", tmp_path / "emb", shards=3, concurrency=2)
    finally:
        ray.shutdown()
    mem = space.embed(LPIPS("alex", device="cpu"), folder)
    assert emb.names == mem.names and len(emb.blocks) == 3 and emb.manifest["shards"] == 3
    assert np.abs(space.pairwise_distances(emb) - space.pairwise_distances(mem)).max() <= 1e-6
