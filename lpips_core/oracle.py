"""The reference ``lpips`` 0.1.4 package's model, holding our backbone weights: the test oracle.

``lpips.LPIPS(pnet_rand=True)`` builds the reference architecture without downloading anything;
:func:`reference_model` then loads the same ``features`` weights our engine uses, so the two can be
compared number for number (tests and ``benchmarks/bench.py``).
"""

from __future__ import annotations

import torch


def reference_model(net: str, version: str = "0.1", lin: bool = True,
                    features_state_dict: dict[str, torch.Tensor] | None = None, *, spatial: bool = False):
    """``lpips.LPIPS(net, version, lpips=lin, spatial=spatial)`` with our (or the given) backbone weights.

    Args:
        features_state_dict: torchvision ``features`` weights; default: the ones
            :func:`lpips_core.weights.load_backbone_weights` resolves.
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
