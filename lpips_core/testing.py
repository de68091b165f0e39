"""Test oracles: the reference packages' own models, holding the same weights as ours.

Each builder returns the reference implementation in eval mode, downloading nothing, so tests and
``benchmarks/bench.py`` can compare our numbers with the reference's number for number:

- :func:`reference_lpips`: ``lpips`` 0.1.4's ``LPIPS`` (``pnet_rand=True``), given our backbone
  weights; its lin layers are the package's own files.
- :func:`reference_stlpips`: ``stlpips-pytorch`` 0.0.2's ``stlpips.LPIPS(variant="shift_tolerant")``,
  which builds its anti-aliased networks itself and is given the shipped checkpoint.
- :func:`reference_dists`: ``DISTS-pytorch`` 0.1's ``DISTS``, built with an untrained VGG16 (its
  ImageNet download patched out), then given our VGG16 weights and the wheel's α, β exactly as its
  ``load_weights=True`` branch assigns them.

All three take inputs ``(N, 3, H, W)`` float32 on the CPU in their package's convention
(``[-1, 1]`` for the two LPIPS, ``[0, 1]`` for DISTS). Importing this module imports none of the
reference packages (or Streamlit); each builder imports its own on first call.
"""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import torch

__all__ = ["reference_dists", "reference_lpips", "reference_stlpips"]


def reference_lpips(net: str, version: str = "0.1", lin: bool = True,
                    features_state_dict: dict[str, torch.Tensor] | None = None, *, spatial: bool = False):
    """``lpips.LPIPS(net, version, lpips=lin, spatial=spatial)`` with our (or the given) backbone weights.

    Args:
        net: ``"alex"``, ``"vgg"`` or ``"squeeze"``.
        version: lin weights version, ``"0.1"`` or ``"0.0"``.
        lin: learned lin layers (``True``) or the unweighted baseline.
        features_state_dict: torchvision ``features`` weights; default: the ones
            :func:`lpips_core.weights.load_backbone_weights` resolves.
        spatial: return ``(N, 1, H, W)`` maps instead of ``(N, 1, 1, 1)`` totals.
    """
    import lpips

    if features_state_dict is None:
        from .weights import load_backbone_weights

        features_state_dict = load_backbone_weights(net).state_dict
    ref = lpips.LPIPS(net=net, version=version, lpips=lin, pnet_rand=True, spatial=spatial, verbose=False)
    own = {}
    for name, module in ref.net.named_modules():
        parts = name.split(".")
        if len(parts) == 2 and parts[0].startswith("slice"):
            for pname, _ in module.named_parameters(recurse=True):
                own[f"{name}.{pname}"] = features_state_dict[f"{parts[1]}.{pname}"]
    ref.net.load_state_dict(own, strict=True)
    return ref.eval()


def reference_stlpips(net: str):
    """``stlpips.LPIPS(net, variant="shift_tolerant")`` holding every tensor of the shipped checkpoint.

    Args:
        net: ``"alex"`` or ``"vgg"``.

    Raises:
        ImportError: the package's stray imports (IPython, torchsummary; the ``test`` extras) are
            missing. FileNotFoundError: no checkpoint installed. RuntimeError: the checkpoint does
            not fit the reference architecture.
    """
    try:
        from stlpips_pytorch import stlpips
    except ImportError as exc:
        raise ImportError(f"the ST-LPIPS oracle cannot be imported ({exc}); install the test extras: "
                          "bash scripts/setup.sh --test") from exc
    from .stlpips import checkpoint_path

    ref = stlpips.LPIPS(net=net, variant="shift_tolerant", verbose=False)
    path = checkpoint_path(net)
    if path is None:
        raise FileNotFoundError(f"no ST-LPIPS {net} checkpoint: install stlpips-pytorch==0.0.2")
    sd = torch.load(path, map_location="cpu", weights_only=True)
    loaded = ref.load_state_dict(sd, strict=False)  # its ``lins`` ModuleList aliases lin0…lin4
    stray = [k for k in loaded.missing_keys if not k.startswith("lins.")]
    if loaded.unexpected_keys or stray:
        raise RuntimeError(f"ST-LPIPS checkpoint mismatch: unexpected {loaded.unexpected_keys}, missing {stray}")
    return ref.eval()


def reference_dists(vgg_state_dict: dict[str, torch.Tensor] | None = None):
    """``DISTS_pt.DISTS()`` with our (or the given) VGG16 ``features`` weights and the wheel's α, β.

    Args:
        vgg_state_dict: torchvision VGG16 ``features`` weights; default: the ones
            :func:`lpips_core.weights.load_backbone_weights` resolves.

    Raises:
        FileNotFoundError: the wheel's ``weights.pt`` is not installed.
    """
    from torchvision.models.vgg import cfgs, make_layers

    from DISTS_pytorch import DISTS_pt

    from .dists import alpha_beta_path

    if vgg_state_dict is None:
        from .weights import load_backbone_weights

        vgg_state_dict = load_backbone_weights("vgg").state_dict

    def untrained_vgg16(pretrained=False, **kwargs):  # its features only: no download, no classifier
        return SimpleNamespace(features=make_layers(cfgs["D"]))

    with mock.patch.object(DISTS_pt.models, "vgg16", untrained_vgg16):
        ref = DISTS_pt.DISTS(load_weights=False)
    conv = {}
    for name, _ in ref.named_parameters():
        if name.startswith("stage"):  # stageK.<torchvision features index>.weight|bias
            conv[name] = vgg_state_dict[name.split(".", 1)[1]]
    path = alpha_beta_path()
    if path is None:
        raise FileNotFoundError("no DISTS alpha/beta weights: install DISTS-pytorch==0.1")
    ab = torch.load(path, map_location="cpu", weights_only=True)
    ref.load_state_dict({**ref.state_dict(), **conv, "alpha": ab["alpha"], "beta": ab["beta"]}, strict=True)
    return ref.eval()
