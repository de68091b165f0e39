"""The pool index (lpips_core.space.pool): projections and a FAISS index on disk, exact re-rank.

Oracles: the engine's per-pair ``model.compare`` (every reported distance within 1e-5) and the
exact search :func:`lpips_core.space.nearest` (with every pool image a candidate, the same
neighbours); planted copies found at rank 1 (an exact copy at distance 0). The folder's files are
checked when opened (digests, shapes, names) and a pool image changed after indexing is refused.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from datasets_shared import distort, image, save
from lpips_core import LPIPS, space
from lpips_core.__main__ import main

TOL = 1e-5
pytest.importorskip("faiss")


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """A pool of 40 smooth random 64 px images (some distortions of others) and 6 queries: an exact
    copy of pool image 3, a near copy of pool image 11, four new images."""
    root = tmp_path_factory.mktemp("pool")
    rng = np.random.default_rng(7)
    base = [image(rng) for _ in range(24)]
    pool = base + [distort(rng, base[i], 5 + i) for i in range(16)]
    for i, arr in enumerate(pool):
        save(arr, root / "pool" / f"p{i:03d}.png")
    save(pool[3], root / "q" / "exact-copy-of-p003.png")
    save(distort(rng, pool[11], 2), root / "q" / "near-copy-of-p011.png")
    for i in range(4):
        save(image(rng), root / "q" / f"new{i}.png")
    return root


@pytest.fixture(scope="module")
def model():
    return LPIPS("alex", device="cpu")


def _tensor(path):
    arr = np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) / 255
    return torch.from_numpy(arr.transpose(2, 0, 1).copy())[None] * 2 - 1


@pytest.mark.parametrize("projection", ["gaussian", "pca"])
def test_every_candidate_reranked_gives_the_exact_search_and_engine_distances(sets, model, tmp_path, projection):
    pool = space.build_pool(model, sets / "pool", tmp_path / "idx", dim=16, projection=projection, sample=30)
    assert len(pool) == 40 and pool.manifest["projection"]["method"] == projection
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == sorted(
        ["pool.json", "proj.npy", "digests.npy", "index.faiss"]
        + (["pca-mean.npy", "pca-axes.npy"] if projection == "pca" else []))
    opened = space.open_pool(tmp_path / "idx")
    found, qnames, skipped = opened.search(model, sets / "q", k=5, candidates=40)
    assert skipped == [] and qnames == sorted(qnames)
    exact = space.nearest(space.embed(model, sets / "q"), space.embed(model, sets / "pool"), 5)
    assert (found.indices == exact.indices).all()
    assert np.abs(found.distances - exact.distances).max() <= 1e-9
    px = torch.cat([_tensor(sets / "pool" / n) for n in opened.names])
    for q, name in enumerate(qnames):  # the per-pair engine: exact LPIPS within 1e-5
        want = model.compare(_tensor(sets / "q" / name).expand(5, -1, -1, -1), px[found.indices[q]]).total
        assert np.abs(found.distances[q] - want.double().numpy()).max() <= TOL
    # planted copies at rank 1; the exact copy at exactly 0
    assert opened.names[found.indices[qnames.index("exact-copy-of-p003.png"), 0]] == "p003.png"
    assert found.distances[qnames.index("exact-copy-of-p003.png"), 0] == 0.0
    assert opened.names[found.indices[qnames.index("near-copy-of-p011.png"), 0]] == "p011.png"


def test_few_candidates_still_find_the_planted_copies(sets, model, tmp_path):
    pool = space.build_pool(model, sets / "pool", tmp_path / "idx", dim=32)
    found, qnames, _ = pool.search(model, sets / "q", k=3, candidates=4)
    assert found.indices.shape == (6, 3)
    for q, p in (("exact-copy-of-p003.png", "p003.png"), ("near-copy-of-p011.png", "p011.png")):
        assert pool.names[found.indices[qnames.index(q), 0]] == p


def test_an_inverted_file_index_is_opened_with_its_probes(sets, model, tmp_path):
    pool = space.build_pool(model, sets / "pool", tmp_path / "idx", dim=8, factory="IVF4,Flat")
    assert pool.manifest["index"] == {"factory": "IVF4,Flat", "nprobe": 4 * 8, "metric": "L2 over the projections"}
    opened = space.open_pool(tmp_path / "idx")
    import faiss

    assert faiss.extract_index_ivf(opened.index).nprobe == 32
    found, qnames, _ = opened.search(model, sets / "q", k=1, candidates=40)
    assert opened.names[found.indices[qnames.index("exact-copy-of-p003.png"), 0]] == "p003.png"


def test_the_folder_is_checked_when_opened(sets, model, tmp_path):
    space.build_pool(model, sets / "pool", tmp_path / "idx", dim=8)
    root = tmp_path / "idx"
    good = (root / "pool.json").read_bytes()
    proj = (root / "proj.npy").read_bytes()
    (root / "proj.npy").write_bytes(proj[:-4] + bytes(4 * [255]))  # a NaN in place of the last value
    with pytest.raises(ValueError, match="not finite|SHA-256"):
        space.open_pool(root)
    (root / "proj.npy").write_bytes(proj)
    for change, match in ((lambda m: m["names"].__setitem__(0, "../outside.png"), "not a relative path inside"),
                          (lambda m: m["names"].__setitem__(0, m["names"][1]), "a name appears twice"),
                          (lambda m: m.update(format="lpips-space-pool/0"), "is not 'lpips-space-pool/1'"),
                          (lambda m: m["arrays"]["proj"].update(file="/etc/passwd"), "does not name proj.npy"),
                          (lambda m: m["projection"].update(dim=9), "float32 \\[40, 9\\]"),
                          (lambda m: m["index"].update(factory="HNSW0"), "HNSW needs")):
        m = json.loads(good)
        change(m)
        (root / "pool.json").write_text(json.dumps(m))
        with pytest.raises(ValueError, match=match):
            space.open_pool(root)
    (root / "pool.json").write_bytes(good)
    index = (root / "index.faiss").read_bytes()
    (root / "index.faiss").write_bytes(index[:-1] + bytes([index[-1] ^ 1]))
    with pytest.raises(ValueError, match="index.faiss: its SHA-256"):
        space.open_pool(root)


def test_a_pool_image_changed_after_indexing_is_refused(tmp_path, model):
    rng = np.random.default_rng(3)
    for i in range(6):
        save(image(rng), tmp_path / "pool" / f"p{i}.png")
    save(image(rng), tmp_path / "q" / "q.png")
    pool = space.build_pool(model, tmp_path / "pool", tmp_path / "idx", dim=4)
    save(image(rng), tmp_path / "pool" / "p2.png")  # other bytes under an indexed name
    with pytest.raises(ValueError, match="'p2.png' changed since it was indexed"):
        pool.search(model, tmp_path / "q", k=6, candidates=6)
    (tmp_path / "pool" / "p4.png").unlink()
    with pytest.raises(ValueError, match="p4.png.*the pool changed since it was indexed"):
        pool.search(model, tmp_path / "q", k=1, candidates=6)


def test_queries_of_another_size_are_refused(sets, model, tmp_path):
    pool = space.build_pool(model, sets / "pool", tmp_path / "idx", dim=8)
    save(image(np.random.default_rng(0), 48, 48), tmp_path / "small" / "s.png")
    with pytest.raises(ValueError, match="resize the queries to the pool's size"):
        pool.search(model, tmp_path / "small")


# --------------------------------------------------------------------------- the command line
def _run(capsys, *args):
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_index_then_neighbours_equals_the_exact_command(sets, tmp_path, capsys):
    code, out, err = _run(capsys, "embed", sets / "pool", tmp_path / "idx", "--proj-dim", "16", "--proj", "pca",
                          "--json")
    assert code == 0, err
    m = json.loads(out)
    assert m["names"] == 40 and m["projection"]["method"] == "pca" and m["index"]["factory"] == "Flat"
    code, out, err = _run(capsys, "neighbours", sets / "q", "--index", tmp_path / "idx", "--k", "3",
                          "--candidates", "40", "--json")
    assert code == 0, err
    got = json.loads(out)
    code, out, _ = _run(capsys, "neighbours", sets / "q", sets / "pool", "--k", "3", "--json")
    want = json.loads(out)
    assert [[n["name"] for n in q["neighbours"]] for q in got["queries"]] == \
        [[n["name"] for n in q["neighbours"]] for q in want["queries"]]
    assert np.allclose([n["distance"] for q in got["queries"] for n in q["neighbours"]],
                       [n["distance"] for q in want["queries"] for n in q["neighbours"]], rtol=0, atol=1e-9)
    assert got["config"]["candidates"] == 40 and "re-ranked exactly" in got["config"]["method"]
    code, out, _ = _run(capsys, "neighbours", sets / "q", "--index", tmp_path / "idx", "--k", "2")
    assert code == 0 and out.splitlines()[1] == "exact-copy-of-p003.png" and out.splitlines()[2].endswith("p003.png")


@pytest.mark.parametrize("args, message", [
    (["neighbours", "Q", "P", "--index", "IDX"], "give a pool folder (POOL_DIR) or a pool index (--index DIR), one"),
    (["neighbours", "Q"], "give a pool folder (POOL_DIR) or a pool index (--index DIR), one"),
    (["neighbours", "Q", "P", "--candidates", "4"], "--candidates needs --index"),
    (["neighbours", "Q", "--index", "IDX", "--approximate"], "--index searches its own FAISS index"),
    (["embed", "P", "OUT", "--proj-dim", "8", "--shard", "0/2"], "--proj-dim builds one pool index of the whole"),
    (["neighbours", "Q", "--index", "P"], "holds no pool index (pool.json)"),
])
def test_cli_refusals_are_one_line(sets, tmp_path, capsys, args, message):
    where = {"Q": sets / "q", "P": sets / "pool", "IDX": tmp_path / "none", "OUT": tmp_path / "out"}
    code, out, err = _run(capsys, *[where.get(a, a) for a in args])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert message in err, err
