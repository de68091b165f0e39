"""Scoring datasets: per-pair values equal the single-pair API, summaries equal NumPy/SciPy,
errors become rows, streamed tables resume and shards merge bit for bit."""

from __future__ import annotations

import os

import numpy as np
import pytest
from scipy import stats

from datasets_shared import assert_same_rows, make_pairs
from lpips_core import metric_registry, metrics
from lpips_core.datasets import MetricSpec, Scorer, match_folders, merge_tables, parse_spec, read_rows, score_pairs
from lpips_core.datasets.store import manifest_path
from lpips_core.images import load_image

SPECS = (
    "mse", "psnr", "ssim",
    "lpips",                                  # alex, 0.1, lin, [-1,1]
    "lpips-alex-baseline",                    # shares the pass above
    "lpips-alex-0.0-lin-[0,255]",
    "lpips-vgg-0.1-lin-[0,1]-gray@48",
    "stlpips-alex",
    "dists",
)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return make_pairs(tmp_path_factory.mktemp("pairs"), n=8)


@pytest.fixture(scope="module")
def scorer():
    return Scorer(SPECS, device="cpu")


@pytest.fixture(scope="module")
def result(folders, scorer):
    return score_pairs(match_folders(*folders), scorer=scorer, batch_size=3, workers=1)


def test_spec_names_round_trip():
    s = parse_spec("lpips-vgg-0.0-baseline-[0,1]-gray@64")
    assert s == MetricSpec("lpips", "vgg", "0.0", False, "[0,1]", True, 64)
    assert s.name == "lpips-vgg-0.0-baseline-[0,1]-gray@64" and parse_spec(s.name) == s
    assert parse_spec("lpips").name == "lpips-alex-0.1-lin-[-1,1]"
    assert parse_spec("dists").name == "dists-vgg-[0,1]"
    assert parse_spec("ST-LPIPS-vgg").name == "stlpips-vgg-[-1,1]"
    assert parse_spec("lpips", net="vgg", lin=False, size=32).name == "lpips-vgg-0.1-baseline-[-1,1]@32"
    assert parse_spec("dists", net="alex", lin=False).name == "dists-vgg-[0,1]"  # defaults apply where they can
    for bad, msg in (("lpips-resnet", "no option 'resnet'"), ("dists-baseline", "no option 'baseline'"),
                     ("foo", "unknown metric"), ("psnr-vgg", "takes no options"), ("", "non-empty")):
        with pytest.raises(ValueError, match=msg):
            parse_spec(bad)


def test_one_row_per_pair_with_names_and_sizes(result, folders):
    rows = result.rows
    assert [r["key"] for r in rows] == sorted(r["key"] for r in rows) and [r["index"] for r in rows] == list(range(8))
    assert [r["key"] for r in rows] == ["p00", "p02", "p03", "p05", "p06", "sub/p01", "sub/p04", "sub/p07"]
    assert (rows[5]["reference"], rows[5]["test"]) == ("sub/p01.png", "sub/p01.png")
    assert rows[0]["test"] == "p00.jpg"
    assert [r["reference_size"] for r in rows] == [r["test_size"] for r in rows]
    assert {r["reference_size"] for r in rows} == {"64x64", "48x56"}
    assert result.columns[:8] == ("index", "key", "reference", "test", "reference_size", "test_size", "error_kind",
                                  "error")
    assert all(r["error_kind"] == "" for r in rows)
    assert result.columns[8:] == tuple(parse_spec(s).name for s in SPECS)
    passes = result.config["passes"]
    assert [p["metrics"] for p in passes][0] == ["lpips-alex-0.1-lin-[-1,1]", "lpips-alex-0.1-baseline-[-1,1]"]
    assert len(passes) == 5  # alex v0.1 (lin + baseline) | alex v0.0 | vgg gray@48 | ST-LPIPS | DISTS


def test_every_metric_equals_the_single_pair_api(result, folders, scorer):
    """Within 1e-6 (absolute, or relative for the baseline's values above 1): the dataset path
    puts several pairs in one backbone batch, and float32 convolutions round differently with
    the batch size (observed ≤ 1e-6 relative)."""
    a_dir, b_dir = folders
    for row in result.rows:
        a = load_image(a_dir / row["reference"]).array
        b = load_image(b_dir / row["test"]).array
        for text in SPECS:
            spec = parse_spec(text)
            if spec.learned:
                model = scorer.model(spec)
                ref = metric_registry.build(spec.metric, spec.net, version=spec.version, lin=spec.lin) \
                    if not spec.lin else model
                opts = dict(convention=spec.convention, size=spec.size, grayscale=spec.grayscale)
                x = metric_registry.prepare_input(spec.metric, a, **opts)
                y = metric_registry.prepare_input(spec.metric, b, **opts)
                want = float(ref.compare(x, y, spatial=False).total[0])
            else:
                want = getattr(metrics, spec.metric)(a, b)
            assert row[spec.name] == pytest.approx(want, abs=1e-6, rel=1e-6), (row["key"], spec.name)


def test_summary_equals_numpy_and_scipy(result):
    for name, s in result.summary["metrics"].items():
        col = np.array([r[name] for r in result.rows], dtype=np.float64)
        n = len(col)
        lo, hi = stats.t.interval(0.95, n - 1, loc=col.mean(), scale=stats.sem(col))
        assert s["n"] == n == 8
        assert s["mean"] == pytest.approx(np.mean(col), rel=1e-12)
        assert s["std"] == pytest.approx(np.std(col, ddof=1), rel=1e-12)
        assert s["ci95"] == pytest.approx([lo, hi], rel=1e-12)
    assert (result.summary["n"], result.summary["skipped"]) == (8, 0)


@pytest.fixture
def broken(tmp_path):
    a, b = make_pairs(tmp_path, n=5, odd_size=0, seed=2)
    (a / "p02.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    from datasets_shared import image, save

    save(image(np.random.default_rng(9), 40, 64), b / "sub" / "p04.png")  # size differs from A's 64 x 64
    return a, b


def test_corrupt_and_mismatched_pairs_are_rows_and_the_rest_is_scored(broken):
    sc = Scorer(["lpips", "psnr"], device="cpu")
    res = score_pairs(match_folders(*broken), scorer=sc, workers=0)
    by = {r["key"]: r for r in res.rows}
    assert by["p02"]["error_kind"] == "unreadable" and "p02.png" in by["p02"]["error"]
    assert by["p02"]["lpips-alex-0.1-lin-[-1,1]"] is None
    assert by["sub/p04"]["error_kind"] == "size-mismatch" and "reference 64x64, test 40x64" in by["sub/p04"]["error"]
    assert by["sub/p04"]["reference_size"] == "64x64" and by["sub/p04"]["test_size"] == "40x64"
    assert all(by[k]["error_kind"] == "" and by[k]["psnr"] > 0 for k in ("p00", "sub/p01", "p03"))
    assert res.summary["n"] == 3 and res.summary["skipped"] == 2
    assert res.summary["skipped_by_reason"] == {"size-mismatch": 1, "unreadable": 1}
    assert res.summary["metrics"]["psnr"]["n"] == 3 and res.config["mismatch"] == "error"


def test_mismatch_policies_resize_and_crop(broken):
    a_dir, b_dir = broken
    sc = Scorer(["mse"], device="cpu")
    a = load_image(a_dir / "sub" / "p04.png").array
    b = load_image(b_dir / "sub" / "p04.png").array
    res = score_pairs(match_folders(*broken), scorer=sc, workers=0, mismatch="crop")
    row = next(r for r in res.rows if r["key"] == "sub/p04")
    assert row["mse"] == metrics.mse(a[12:52], b) and res.config["mismatch"] == "crop"
    res = score_pairs(match_folders(*broken), scorer=sc, workers=0, mismatch="resize")
    row = next(r for r in res.rows if r["key"] == "sub/p04")
    import torch

    from lpips_core.conventions import resize

    b64 = resize(torch.from_numpy(b).permute(2, 0, 1)[None], (64, 64))[0].permute(1, 2, 0).numpy()
    assert row["mse"] == pytest.approx(metrics.mse(a, np.clip(b64, 0, 1)), abs=1e-12)


def test_models_are_kept_under_their_spec(scorer, monkeypatch):
    """A scorer keeps each model under its spec (``model_spec`` with lin weights), built by the
    spec: LPIPS lin and its baseline share one model; models given by spec are used, not rebuilt."""
    scorer.build_all()
    learned = [s for s in scorer.specs if s.learned]
    assert set(scorer._models) == {s.replace(lin=True).model_spec for s in learned}
    assert all(isinstance(k, MetricSpec) for k in scorer._models)
    assert scorer.model(parse_spec("lpips")) is scorer.model(parse_spec("lpips-alex-baseline"))
    alex = scorer.model(parse_spec("lpips"))
    monkeypatch.setattr(MetricSpec, "build", lambda self, device=None: pytest.fail(f"{self.name} rebuilt"))
    at_32 = parse_spec("lpips-alex-0.1-baseline-[0,1]@32")
    for given in ({parse_spec("lpips"): alex}, {parse_spec("lpips-alex-0.1-lin-[0,1]-gray@64"): alex}):
        assert Scorer([at_32], device="cpu", models=given).model(at_32) is alex
    for key in ("lpips-alex", ("lpips", "alex", "0.1")):
        with pytest.raises(TypeError, match="keyed by MetricSpec"):
            Scorer([at_32], device="cpu", models={key: alex})


class _Stop(Exception):
    pass


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_interrupt_and_resume_give_the_same_table(folders, scorer, tmp_path, suffix):
    disc = match_folders(*folders)
    specs = ["lpips", "psnr", "ssim"]
    sc = Scorer(specs, device="cpu", models=scorer._models)
    full = tmp_path / f"full{suffix}"
    score_pairs(disc, scorer=sc, out=str(full), batch_size=3, workers=0)
    part = tmp_path / f"part{suffix}"
    calls = []

    def stop_after_first_block(done, total):
        calls.append(done)
        if done >= 3:
            raise _Stop

    with pytest.raises(_Stop):
        score_pairs(disc, scorer=sc, out=str(part), batch_size=3, workers=0, progress=stop_after_first_block)
    assert len(read_rows(part)[1]) == 3  # the first block is on disk already
    with open(part, "a") as fh:
        fh.write('4,"torn')  # a line cut by the kill
    with pytest.raises(ValueError, match="exists"):
        score_pairs(disc, scorer=sc, out=str(part), batch_size=3, workers=0)
    seen = []
    res = score_pairs(disc, scorer=sc, out=str(part), resume=True, batch_size=3, workers=0,
                      progress=lambda d, t: seen.append(d))
    assert seen[0] == 3  # the first block was skipped
    assert part.read_bytes() == full.read_bytes()
    assert res.summary == score_pairs(disc, scorer=sc, batch_size=3, workers=0).summary
    with pytest.raises(ValueError, match="another configuration"):
        score_pairs(disc, scorer=sc, out=str(part), resume=True, batch_size=4, workers=0)


def test_three_shards_merged_equal_one_run_bit_for_bit(folders, scorer, tmp_path):
    disc = match_folders(*folders)
    sc = Scorer(["lpips", "lpips-alex-baseline", "ssim"], device="cpu", models=scorer._models)
    one = tmp_path / "one.csv"
    whole = score_pairs(disc, scorer=sc, out=str(one), batch_size=2, workers=0)
    shards = [tmp_path / f"s{i}.csv" for i in range(3)]
    sizes = []
    for i, path in enumerate(shards):
        sizes.append(len(score_pairs(disc, scorer=sc, out=str(path), shard=(i, 3), batch_size=2, workers=0).rows))
    assert sizes == [2, 2, 4]  # 4 blocks of 2 pairs over 3 shards
    merged = tmp_path / "merged.csv"
    manifest = merge_tables([shards[2], shards[0], shards[1]], merged)
    assert merged.read_bytes() == one.read_bytes()
    assert manifest["summary"] == whole.summary
    with pytest.raises(ValueError, match="shards 0…2 of 3 once each"):
        merge_tables(shards[:2], tmp_path / "m2.csv")
    with pytest.raises(ValueError, match="missing"):
        manifest_path(shards[0]).unlink()
        merge_tables(shards, tmp_path / "m3.csv")


def test_workers_and_block_layout_do_not_change_a_number(folders, result, scorer):
    """Blocks scored in lanes (``result``) or everything here: the same rows (bit for bit when
    both ran on the same kernels, see :func:`datasets_shared.assert_same_rows`); decoded by a
    worker or here: the same tensors; a block's pairs of one size are rows of one tensor per side,
    which the scorer batches without stacking them again."""
    import torch

    from lpips_core.datasets.loader import PairDataset, block_loader, decode_pair, stack_rows

    disc = match_folders(*folders)
    again = score_pairs(disc, scorer=scorer, batch_size=3, workers=0)
    assert_same_rows(again.rows, result.rows, list(scorer.names))
    if torch.get_num_threads() == 1:
        assert again.rows == result.rows
    pairs = sorted(disc.pairs, key=lambda p: p.key)
    blocks = [[0, 1, 2], [3, 4, 5], [6, 7]]
    for workers in (0, 1):
        got = list(block_loader(PairDataset(pairs), blocks, workers=workers))
        assert [[d.index for d in items] for items in got] == blocks
        for items in got:
            for d in items:
                one = decode_pair(d.index, pairs[d.index])
                assert torch.equal(d.a, one.a) and torch.equal(d.b, one.b) and d.a.is_contiguous()
            a = stack_rows([d.a for d in items if d.a.shape == items[0].a.shape])
            assert a.data_ptr() == items[0].a.data_ptr()  # a view, no copy
    first = got[0]  # p00, p02, p03: all 64 x 64
    swapped = stack_rows([first[1].a, first[0].a])  # not in order: stacked
    assert swapped.data_ptr() != first[0].a.data_ptr() and torch.equal(swapped[1], first[0].a)


def test_fused_input_and_numpy_head_equal_the_plain_path(monkeypatch):
    """``input_affine`` (the convention fused with the scaling layer) and the NumPy head agree
    with the plain PyTorch path (inputs in the convention, scaled, normalised in PyTorch)."""
    import torch

    import lpips_core.model as model_module
    from lpips_core.conventions import apply_convention
    from lpips_core.datasets.score import FROM_UNIT

    gen = torch.Generator().manual_seed(0)
    a01, b01 = torch.rand(5, 3, 40, 48, generator=gen), torch.rand(5, 3, 40, 48, generator=gen)
    for conv, (gain, bias) in FROM_UNIT.items():
        assert torch.equal(apply_convention(a01, conv), a01 * gain + bias)
    for version, conv in (("0.1", "[-1,1]"), ("0.0", "[0,255]")):
        m = metric_registry.build("lpips", "alex", version=version)
        for numpy_head in (False, True):
            monkeypatch.setattr(model_module, "_numpy_head", lambda device, on=numpy_head: on)
            plain = m.pair_channel_terms(apply_convention(a01, conv), apply_convention(b01, conv))
            fused = m.pair_channel_terms(a01, b01, input_affine=FROM_UNIT[conv])
            one_many = m.pair_channel_terms(a01[:1], b01, input_affine=FROM_UNIT[conv])
            if numpy_head:
                for g, w in zip(plain, torch_plain):
                    torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-7)
            else:
                torch_plain = plain
            for p, f in zip(plain, fused):
                torch.testing.assert_close(f, p, rtol=1e-5, atol=1e-7)
            plain_one_many = m.pair_channel_terms(apply_convention(a01[:1], conv), apply_convention(b01, conv))
            for p, f in zip(plain_one_many, one_many):
                torch.testing.assert_close(f, p, rtol=1e-5, atol=1e-7)


def test_each_pass_asks_for_the_batch_of_the_images_it_runs(folders, monkeypatch):
    """The network passes of a block ask ``images_per_batch`` for the bucket's images (both sides
    of its pairs), so a batch measured fastest for that many images (``lpips_core.batching``) is
    used; a DISTS pass then compares the bucket in chunks of that many images."""
    sc = Scorer(["lpips", "dists"], device="cpu")
    asked = {}
    for spec in sc.specs:
        model = sc.model(spec)
        real = model.images_per_batch

        def spy(h, w, *, images=None, real=real, name=spec.metric):
            asked.setdefault(name, []).append((h, w, images))
            return real(h, w, images=images)

        monkeypatch.setattr(model, "images_per_batch", spy)
    res = score_pairs(match_folders(*folders), scorer=sc, batch_size=4, workers=0)
    assert [r["key"] for r in res.rows if r["error_kind"]] == []
    # blocks of 4 pairs: p00 p02 p03 p05 (64 px) | p06 sub/p07 (48 x 56) + sub/p01 sub/p04 (64 px)
    assert asked["lpips"] == [(64, 64, 8), (48, 56, 4), (64, 64, 4)]
    dists = asked["dists"]
    assert dists[0] == (64, 64, 8) and (48, 56, 4) in dists and (64, 64, 4) in dists


def test_scoring_lanes_give_the_rows_of_one_process(broken):
    """Two lanes (worker processes that decode and score whole blocks, one torch thread each) give
    the rows of scoring in this process: the same errors, the same values (±1e-6)."""
    from lpips_core.datasets.score import default_lanes

    sc = Scorer(["lpips", "lpips-vgg", "psnr"], device="cpu")
    pairs = match_folders(*broken)
    here = score_pairs(pairs, scorer=sc, batch_size=2, lanes=0, workers=0)
    lanes = score_pairs(pairs, scorer=sc, batch_size=2, lanes=2)
    assert [(r["key"], r["error_kind"], r["error"]) for r in lanes.rows] == \
        [(r["key"], r["error_kind"], r["error"]) for r in here.rows]
    assert sum(r["error_kind"] != "" for r in lanes.rows) == 2
    for r, h in zip(lanes.rows, here.rows):
        for name in sc.names:
            assert (r[name] is None) == (h[name] is None)
            if h[name] is not None:
                assert r[name] == pytest.approx(h[name], abs=1e-6)
    assert lanes.summary["skipped"] == here.summary["skipped"]
    with pytest.raises(ValueError, match="lanes"):
        score_pairs(pairs, scorer=sc, lanes=-1)

    import torch

    cpu = torch.device("cpu")
    assert default_lanes(cpu, 1) == 0 and default_lanes(cpu, 4, workers=0) == 0  # one block / all here
    assert default_lanes(torch.device("meta"), 4) == 0  # not a CPU: the network stays in this process
    assert default_lanes(cpu, 4) == (min(os.cpu_count(), 8) if (os.cpu_count() or 1) > 1 else 0)


def test_lane_threads_give_the_rows_of_lane_processes(broken):
    """Two lanes as threads of this process (``lane_kind="thread"``, the app's: a server must not
    fork) give the rows of two forked lanes bit for bit (the same one-thread route) with the same
    errors; the scorer's ``on_pass`` is called in the calling thread only, with the passes of a run
    in this process; the caller's torch thread count is kept."""
    import threading

    import torch

    sc = Scorer(["lpips", "lpips-vgg", "psnr"], device="cpu")
    pairs = match_folders(*broken)
    forked = score_pairs(pairs, scorer=sc, batch_size=2, lanes=2)
    calls: dict[str, list] = {"here": [], "threads": []}
    before = torch.get_num_threads()
    try:
        for kind, opts in (("here", dict(lanes=0)), ("threads", dict(lanes=2, lane_kind="thread"))):
            sc.on_pass = lambda p, s, kind=kind: calls[kind].append((threading.get_ident(), p, s))
            res = score_pairs(pairs, scorer=sc, batch_size=2, workers=0, **opts)
    finally:
        sc.on_pass = None
    assert torch.get_num_threads() == before
    assert res.rows == forked.rows and sum(r["error_kind"] != "" for r in res.rows) == 2
    assert {t for t, _, _ in calls["threads"]} == {threading.get_ident()}
    assert sorted(c[1:] for c in calls["threads"]) == sorted(c[1:] for c in calls["here"]) != []
    table = broken[0].parent / "never.csv"
    with pytest.raises(ValueError, match="lane_kind"):
        score_pairs(pairs, scorer=sc, lanes=2, lane_kind="fork", out=str(table))
    assert not table.exists()  # refused before the table is opened


def test_given_models_with_equal_backbones_run_one(folders):
    """VGG16 of versions 0.0 and 0.1 given as two models (the app's cache) run one backbone in the
    scorer (one pass's kernels kept, not two) through a copy: the given models keep their own, and
    the rows equal those of a scorer that built its models itself."""
    from lpips_core.spec import MetricSpec

    given = {(s := MetricSpec("lpips", net="vgg", version=v)): s.build("cpu") for v in ("0.1", "0.0")}
    own = [m.backbone for m in given.values()]
    names = ["lpips-vgg-0.1", "lpips-vgg-0.0-baseline"]
    sc = Scorer(names, device="cpu", models=given)
    m1, m0 = (sc.model(s) for s in sc.specs)
    assert m1.backbone is m0.backbone and m0 is not given[MetricSpec("lpips", net="vgg", version="0.0")]
    assert [m.backbone for m in given.values()] == own and own[0] is not own[1]
    pairs = match_folders(*folders)
    assert score_pairs(pairs, scorer=sc, batch_size=4, workers=0).rows == \
        score_pairs(pairs, names, batch_size=4, workers=0).rows


def test_package_versions_are_the_installed_ones_and_a_new_dict_each_call():
    from importlib import metadata

    import torch

    from lpips_core.datasets.score import package_versions

    first = package_versions()
    # the distributions' versions (torch's without the local "+cu130" that torch.__version__ adds)
    assert first["torch"] == metadata.version("torch") == torch.__version__.split("+")[0]
    assert first["numpy"] == np.__version__
    first["torch"] = "edited by a caller"
    assert package_versions()["torch"] == metadata.version("torch")  # the cached lookup is not shared


def test_small_passes_of_one_backbone_run_together(folders, monkeypatch):
    """Resized and gray passes of at most 96 × 96 px that share a backbone (VGG16's two versions:
    the scorer gives both models one backbone) run in shared batches: one group per input size,
    each value within 1e-6 of its pass run alone."""
    from lpips_core.datasets import score as score_module

    specs = [MetricSpec("lpips", "vgg", v, lin, c, gray, size) for v in ("0.1", "0.0") for lin in (True, False)
             for c in ("[-1,1]", "[0,255]") for gray in (False, True) for size in (None, 48)]
    sc = Scorer(specs, device="cpu")
    sc.build_all()
    assert sc.model(specs[0]).backbone is sc.model(specs[-1]).backbone
    groups = sc._small_groups((64, 64), lambda key: key)
    sizes = sorted(len(g) for g in groups)
    assert sizes == [4, 8]  # 64 px gray (2 versions × 2 ranges); 48 px colour and gray
    pairs = match_folders(*folders)
    together = score_pairs(pairs, scorer=sc, workers=0, lanes=0).rows
    monkeypatch.setattr(score_module, "TOGETHER_MAX_PIXELS", 0)
    alone = score_pairs(pairs, scorer=Scorer(specs, device="cpu"), workers=0, lanes=0).rows
    for got, want in zip(together, alone):
        for s in specs:
            if want[s.name] is not None:
                assert got[s.name] == pytest.approx(want[s.name], abs=1e-6), s.name


def test_shares_backbone_compares_network_and_weights():
    import torch

    a, b, alex = (parse_spec(n).build("cpu") for n in ("lpips-vgg", "lpips-vgg-0.0", "lpips-alex"))
    assert a.shares_backbone(b) and b.shares_backbone(a) and a.shares_backbone(a)
    assert not a.shares_backbone(alex) and not alex.shares_backbone(a)
    with torch.no_grad():
        next(b.backbone.parameters())[0, 0, 0, 0] += 1e-3
    assert not a.shares_backbone(b)
