"""NNPACK's Winograd convolution of one image on one thread, with each layer's kernel transformed once.

``torch._nnpack_spatial_convolution`` of one image calls NNPACK's ``nnp_convolution_inference``
(Winograd F(6×6, 3×3) for a 3×3 stride-1 layer) with the *compute* strategy: every call
transforms the layer's whole kernel again, up to 512 × 512 × 64 floats (64 MiB) for VGG16's deep
layers, which is most of the call on maps of 32 px and under. :func:`conv3x3` calls the same NNPACK
function (exported by ``libtorch_cpu``) with the *reuse* strategy: the kernel is transformed once
per layer (:func:`transformed_kernel`, kept while the layer lives) and each call reads it. The
arithmetic is the same, so the outputs are the same bits as torch's call
(``tests/test_winograd.py``); ``relu=True`` applies the ReLU in NNPACK's output transform (the
same bits as a ReLU after it).

The call runs on the calling thread (no thread pool): it is used only where torch runs one thread
(a dataset scoring lane, :func:`lpips_core.backbones.run_layers`). Where libtorch has no such
symbol or NNPACK refuses a call, :func:`available` turns false and the caller keeps its own path.
The measurements behind :data:`MIN_SIDE` are in docs/performance.md, "Measurements behind the
code's choices".
"""

from __future__ import annotations

import ctypes
import os
import threading
import weakref

import torch
from torch import nn

__all__ = ["MIN_SIDE", "available", "conv3x3", "eligible", "forget", "has_kernel", "layer_eligible",
           "transformed_kernel"]

#: The smallest map side (of a layer's input) sent here: on one thread, VGG16's layers over
#: 16–256 px maps (and AlexNet's 13–15 px ones) are faster with the kept kernel than in torch's
#: NNPACK call or oneDNN; over 8 and 4 px maps reading 64 MiB of transformed kernel costs more
#: than oneDNN's direct convolution.
MIN_SIDE = 12

# nnp_convolution_algorithm_wt8x8, nnp_convolution_transform_strategy_{precompute, reuse},
# nnp_activation_{identity, relu} (NNPACK's include/nnpack.h)
_WT8X8, _PRECOMPUTE, _REUSE, _IDENTITY, _RELU = 3, 2, 3, 0, 1
_ALIGN = 64  # bytes: buffers handed to NNPACK start on a cache line, as its own allocations do


class _Size(ctypes.Structure):
    _fields_ = [("width", ctypes.c_size_t), ("height", ctypes.c_size_t)]


class _Padding(ctypes.Structure):
    _fields_ = [("top", ctypes.c_size_t), ("right", ctypes.c_size_t), ("bottom", ctypes.c_size_t),
                ("left", ctypes.c_size_t)]


_STATE: dict = {}
_KERNELS: "weakref.WeakKeyDictionary[nn.Conv2d, tuple]" = weakref.WeakKeyDictionary()
_KERNELS_LOCK = threading.Lock()
_WORKSPACE = threading.local()


def _function():
    """``nnp_convolution_inference`` from the loaded libtorch, or ``None`` (no such symbol, no NNPACK)."""
    if "fn" not in _STATE:
        fn = None
        try:
            if torch.backends.nnpack.is_available():  # also runs nnp_initialize
                lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
                fn = lib.nnp_convolution_inference
                fn.restype = ctypes.c_int
                fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, _Size, _Padding,
                               _Size, _Size, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_int, ctypes.c_void_p,
                               ctypes.c_void_p, ctypes.c_void_p]
        except (OSError, AttributeError):
            fn = None
        _STATE["fn"] = fn
    return _STATE["fn"]


def available() -> bool:
    """Whether :func:`conv3x3` can run here (libtorch exports NNPACK's call, and none has failed)."""
    return _function() is not None and not _STATE.get("failed", False)


def layer_eligible(layer: nn.Module) -> bool:
    """Whether ``layer`` is one :func:`conv3x3` computes: a dense 3×3 stride-1 float32 CPU
    convolution with a bias, zero padding under 3 and at least 16 input channels."""
    return (isinstance(layer, nn.Conv2d) and layer.kernel_size == (3, 3) and layer.stride == (1, 1)
            and layer.dilation == (1, 1) and layer.groups == 1 and layer.in_channels >= 16
            and isinstance(layer.padding, tuple) and max(layer.padding) < 3 and layer.padding_mode == "zeros"
            and layer.bias is not None and layer.weight.dtype == torch.float32
            and layer.weight.device.type == "cpu" and layer.weight.is_contiguous())


def eligible(layer: nn.Module, x: torch.Tensor) -> bool:
    """Whether ``layer(x)`` may go to :func:`conv3x3`: an :func:`layer_eligible` layer and one float32
    CPU image whose map sides are at least :data:`MIN_SIDE` (the caller checks the thread count)."""
    return (x.dim() == 4 and x.dtype == torch.float32 and x.device.type == "cpu"
            and min(x.shape[-2:]) >= MIN_SIDE and layer_eligible(layer) and available())


def _aligned(nbytes: int) -> torch.Tensor:
    """A float32 CPU tensor of at least ``nbytes`` bytes whose data starts on an :data:`_ALIGN` boundary."""
    raw = torch.empty(nbytes // 4 + _ALIGN // 4, dtype=torch.float32)
    return raw[(-raw.data_ptr() % _ALIGN) // 4:]


def _call(strategy: int, layer: nn.Conv2d, size: tuple[int, int], x, kernel, out, workspace, workspace_size,
          activation: int = _IDENTITY) -> None:
    h, w = size
    ph, pw = layer.padding
    status = _function()(_WT8X8, strategy, layer.in_channels, layer.out_channels, _Size(w, h),
                         _Padding(ph, pw, ph, pw), _Size(3, 3), _Size(1, 1), x, kernel, layer.bias.data_ptr(),
                         out, workspace, workspace_size, activation, None, None, None)
    if status != 0:
        _STATE["failed"] = True
        raise RuntimeError(f"NNPACK's convolution returned status {status}")


def _weight_key(weight: torch.Tensor) -> tuple[int, int]:
    # an inference tensor (a model built under torch.inference_mode) has no version counter
    return weight.data_ptr(), -1 if weight.is_inference() else weight._version


def transformed_kernel(layer: nn.Conv2d) -> torch.Tensor:
    """``layer``'s kernel in NNPACK's Winograd form, made on first use and again whenever its weight's
    storage or version has changed (kept while ``layer`` lives: 64 MiB for a 512 × 512 layer)."""
    weight = layer.weight
    key = _weight_key(weight)
    with _KERNELS_LOCK:
        kept = _KERNELS.get(layer)
    if kept is not None and kept[0] == key:
        return kept[1]
    nbytes = ctypes.c_size_t(0)
    _call(_PRECOMPUTE, layer, (8, 8), None, weight.data_ptr(), None, None, ctypes.byref(nbytes))
    with torch.inference_mode(False):
        buf = _aligned(nbytes.value)
    _call(_PRECOMPUTE, layer, (8, 8), None, weight.data_ptr(), None, buf.data_ptr(), ctypes.byref(nbytes))
    with _KERNELS_LOCK:
        _KERNELS[layer] = (key, buf)
    return buf


def has_kernel(layer: nn.Conv2d) -> bool:
    """Whether ``layer``'s transformed kernel is kept (and current)."""
    with _KERNELS_LOCK:
        kept = _KERNELS.get(layer)
    return kept is not None and kept[0] == _weight_key(layer.weight)


def forget(layer: nn.Conv2d) -> None:
    """Drop ``layer``'s kept kernel (its memory goes when no call is using it)."""
    with _KERNELS_LOCK:
        _KERNELS.pop(layer, None)


def _workspace(nbytes: int) -> torch.Tensor:
    """This thread's scratch buffer for NNPACK's input and output transforms, grown as needed."""
    buf = getattr(_WORKSPACE, "buf", None)
    if buf is None or buf.numel() * 4 < nbytes:
        with torch.inference_mode(False):
            buf = _WORKSPACE.buf = _aligned(nbytes)
    return buf


def conv3x3(layer: nn.Conv2d, x: torch.Tensor, *, relu: bool = False) -> torch.Tensor:
    """``layer(x)`` (``relu``: ``relu(layer(x))``) for an :func:`eligible` pair, on this thread.

    Args:
        layer: the convolution; x: ``(1, C_in, H, W)``, float32 on the CPU.

    Returns:
        ``(1, C_out, H', W')``, the same bits as ``torch._nnpack_spatial_convolution`` of the same
        arguments (then ``torch.relu``).

    Raises:
        RuntimeError: NNPACK refused the call (:func:`available` is false from then on).
    """
    kernel = transformed_kernel(layer)
    x = x.contiguous()
    n, _, h, w = x.shape
    ph, pw = layer.padding
    out = torch.empty((n, layer.out_channels, h + 2 * ph - 2, w + 2 * pw - 2), dtype=torch.float32)
    nbytes = ctypes.c_size_t(0)
    _call(_REUSE, layer, (h, w), x.data_ptr(), kernel.data_ptr(), out.data_ptr(), None, ctypes.byref(nbytes))
    space = _workspace(nbytes.value)
    for i in range(n):
        _call(_REUSE, layer, (h, w), x[i].data_ptr(), kernel.data_ptr(), out[i].data_ptr(), space.data_ptr(),
              ctypes.byref(nbytes), _RELU if relu else _IDENTITY)
    return out
