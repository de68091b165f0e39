"""torchvision backbones tapped after the same ReLUs as the reference ``lpips`` package.

==========  ==========================================  ==================================
net         taps (torchvision ``features`` index)        layer names
==========  ==========================================  ==================================
alex        1, 4, 7, 9, 11                               relu1 … relu5
vgg         3, 8, 15, 22, 29                             relu1_2, relu2_2, relu3_3, relu4_3,
                                                         relu5_3
squeeze     1, 4, 7, 9, 10, 11, 12 (SqueezeNet 1.1)      relu1 … relu7
==========  ==========================================  ==================================

Only ``features`` up to the last tap is kept (no classifier, no final pooling).

:func:`run_layers` runs a stack; on a CPU process with one or two torch threads (a dataset
scoring lane, the app's server) its large stride-1 convolutions go through NNPACK instead of
oneDNN (see :func:`nnpack_conv`).
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn

from . import environment, winograd

__all__ = ["Backbone", "CHANNELS", "FIRST_STRIDE", "LAYER_NAMES", "TAPS", "contiguous_stack", "layers_for", "nnpack_conv",
           "between_layers", "lane_thread", "nnpack_pool", "run_layers", "share_with_lanes", "without_nnpack"]

TAPS: dict[str, tuple[int, ...]] = {
    "alex": (1, 4, 7, 9, 11),
    "vgg": (3, 8, 15, 22, 29),
    "squeeze": (1, 4, 7, 9, 10, 11, 12),
}
LAYER_NAMES: dict[str, tuple[str, ...]] = {
    "alex": ("relu1", "relu2", "relu3", "relu4", "relu5"),
    "vgg": ("relu1_2", "relu2_2", "relu3_3", "relu4_3", "relu5_3"),
    "squeeze": ("relu1", "relu2", "relu3", "relu4", "relu5", "relu6", "relu7"),
}
#: stride of the first tap relative to the input (its activations dominate a batch's memory)
FIRST_STRIDE: dict[str, int] = {"alex": 4, "vgg": 1, "squeeze": 2}
CHANNELS: dict[str, tuple[int, ...]] = {
    "alex": (64, 192, 384, 256, 256),
    "vgg": (64, 128, 256, 512, 512),
    "squeeze": (64, 128, 256, 384, 384, 512, 512),
}


#: torchvision's ``features`` layers up to the last tap, for the two plain stacks: ``(out
#: channels, kernel, stride, padding)`` per convolution (each followed by an in-place ReLU) and
#: ``"M"`` for a 3×3/2 (AlexNet) or 2×2/2 (VGG16) max-pool. ``tests/test_model.py`` checks that
#: the modules built from them print exactly as torchvision's ``alexnet().features`` and
#: ``vgg16().features`` sliced at the last tap.
_PLAIN: dict[str, tuple] = {
    "alex": ((64, 11, 4, 2), "M", (192, 5, 1, 2), "M", (384, 3, 1, 1), (256, 3, 1, 1), (256, 3, 1, 1)),
    "vgg": ((64, 3, 1, 1), (64, 3, 1, 1), "M", (128, 3, 1, 1), (128, 3, 1, 1), "M",
            *((256, 3, 1, 1),) * 3, "M", *((512, 3, 1, 1),) * 3, "M", *((512, 3, 1, 1),) * 3),
}


def _features_architecture(net: str) -> nn.Sequential:
    """The ``features`` stack up to the last tap, on the meta device (no time spent initialising
    weights that are replaced anyway).

    AlexNet and VGG16 are built from :data:`_PLAIN`, without importing torchvision: that import
    pulls in ``torch._dynamo``, seconds of the app's cold start (docs/performance.md,
    "Measurements behind the code's choices"). SqueezeNet 1.1 (Fire modules) comes from
    torchvision itself.
    """
    with torch.device("meta"):
        if net in _PLAIN:
            pool = (3, 2) if net == "alex" else (2, 2)
            layers: list[nn.Module] = []
            channels = 3
            for spec in _PLAIN[net]:
                if spec == "M":
                    layers.append(nn.MaxPool2d(kernel_size=pool[0], stride=pool[1]))
                    continue
                out, kernel, stride, padding = spec
                layers += [nn.Conv2d(channels, out, kernel_size=kernel, stride=stride, padding=padding),
                           nn.ReLU(inplace=True)]
                channels = out
            return nn.Sequential(*layers)[: TAPS[net][-1] + 1]
        import torchvision.models as tvm

        return tvm.squeezenet1_1(weights=None).features[: TAPS[net][-1] + 1]


def contiguous_stack(owner: nn.Module) -> nn.Sequential:
    """``owner.features`` with contiguous weights: the stack itself when they already are, else a
    copy of it, made on first use and again whenever a parameter's storage, dtype, device or
    version has changed since (``.to``, ``.double()``, an in-place edit). The copy is not a
    registered submodule (not in ``state_dict``, not moved by ``.to``). It is made outside
    inference mode even when the call that needs it first runs inside it (the NNPACK pass of
    :func:`run_layers`): its weights must also serve a later differentiable call
    (:func:`layers_for`), and autograd refuses inference tensors."""
    feats = owner.features
    weight = next((m.weight for m in feats.modules() if isinstance(m, nn.Conv2d)), None)
    if weight is None or weight.is_contiguous():
        return feats
    # an inference tensor (a model built under torch.inference_mode) has no version counter
    key = tuple((p.data_ptr(), -1 if p.is_inference() else p._version, p.dtype, p.device)
                for p in feats.parameters())
    if owner.__dict__.get("_contiguous_key") != key:
        with torch.inference_mode(False):
            owner.__dict__["_contiguous_features"] = copy.deepcopy(feats).to(memory_format=torch.contiguous_format)
        owner.__dict__["_contiguous_key"] = key
    return owner.__dict__["_contiguous_features"]


def layers_for(owner: nn.Module, x: torch.Tensor) -> nn.Sequential:
    """The layers ``owner`` (a backbone with a ``features`` stack) runs ``x`` through.

    ``owner.features`` itself, unless a gradient will flow (autograd enabled and ``x`` requires
    grad) while its weights are channels-last (a CPU model, see
    :attr:`lpips_core.protocol.LearnedMetric.channels_last_on_cpu`): then its
    :func:`contiguous_stack`. Channels-last convolutions give the same distances to ~1e-8 but
    moved VGG16's input gradients up to 1.6e-5 from the reference package's; the contiguous
    copy keeps them within the 1e-6 parity bound.
    """
    if not (torch.is_grad_enabled() and x.requires_grad):
        return owner.features
    return contiguous_stack(owner)


#: Whether :func:`run_layers` may use NNPACK at all (environment ``LPIPS_EXPLORER_NNPACK=0`` turns
#: it off; tests switch it per call).
USE_NNPACK: bool = environment.nnpack()
#: Whether ``torch.compile`` is tracing (see :func:`_traced_layers`).
_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
#: the smallest map side (of a convolution's input) that goes to NNPACK, see :func:`_nnpack_layer`
NNPACK_MIN_SIDE = 24
#: the most torch threads NNPACK is used with (the counts it was timed at; above, oneDNN stays)
NNPACK_MAX_THREADS = 2
#: the CPU capabilities (``torch.backends.cpu.get_cpu_capability()``) where NNPACK also runs on
#: more than one thread: there it beats oneDNN. On AVX-512 hosts oneDNN's kernels use the wider
#: vectors while NNPACK's are AVX2 at best, so two threads keep oneDNN (docs/performance.md,
#: "Measurements behind the code's choices").
NNPACK_MULTI_THREAD_CPUS = ("AVX2",)
# "ready": NNPACK initialised on this CPU; "failed": a call raised; "pool": (pid, threads) of the
# process that made NNPACK's thread pool and the thread count it was made for; "cpu": torch's CPU
# capability
_NNPACK: dict = {}


def _nnpack_ready() -> bool:
    if "ready" not in _NNPACK:
        # is_available() also initialises NNPACK; without it the first convolution fails.
        _NNPACK["ready"] = bool(torch.backends.nnpack.is_available())
    return _NNPACK["ready"] and not _NNPACK.get("failed", False)


def _cpu_capability() -> str:
    if "cpu" not in _NNPACK:
        _NNPACK["cpu"] = torch.backends.cpu.get_cpu_capability()
    return _NNPACK["cpu"]


def nnpack_pool(threads: int | None = None) -> int | None:
    """The thread count NNPACK's pool was made for in this process (``None``: not made yet).

    PyTorch makes that pool once, at NNPACK's first convolution, for the torch thread count of
    that moment, and keeps it for the life of the process. Given ``threads`` and no pool yet,
    this makes it now, for ``threads`` (one tiny convolution), so that a process decides its
    NNPACK thread count up front (the test suite makes a one-thread pool, as in a scoring lane).
    A pool inherited through ``fork`` counts only if it was made for one thread: a pool of more
    lost its worker threads in the fork, and a call would wait for them forever.
    """
    pool = _NNPACK.get("pool")
    if pool is None and threads is not None and _nnpack_ready():
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            x = torch.zeros(1, 1, 4, 4)
            _nnpack_call(x, torch.zeros(1, 1, 3, 3), torch.zeros(1), (1, 1))
        finally:
            torch.set_num_threads(before)
        pool = _NNPACK.get("pool")
    if pool is None:
        return None
    pid, n = pool
    return n if pid == os.getpid() or n == 1 else 0


def _nnpack_call(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, padding) -> torch.Tensor:
    """``torch._nnpack_spatial_convolution``, noting the pool its first call makes (see
    :func:`nnpack_pool`). With more than one thread, a batch goes one image at a time: on two
    threads NNPACK's batched algorithm is slower than oneDNN, its one-image algorithm faster
    (docs/performance.md, "Measurements behind the code's choices")."""
    if "pool" not in _NNPACK:
        _NNPACK["pool"] = (os.getpid(), torch.get_num_threads())
    if x.shape[0] > 1 and _NNPACK["pool"][1] > 1:
        return torch.cat([torch._nnpack_spatial_convolution(x[i:i + 1], weight, bias, padding)
                          for i in range(x.shape[0])])
    return torch._nnpack_spatial_convolution(x, weight, bias, padding)


def nnpack_conv(x: torch.Tensor) -> bool:
    """Whether a forward pass of ``x`` may send convolutions to NNPACK.

    Only for inference (no gradient will flow) of float32 CPU tensors, with at most
    :data:`NNPACK_MAX_THREADS` torch threads (more than one only on the CPUs of
    :data:`NNPACK_MULTI_THREAD_CPUS`), and only with the thread count NNPACK's pool was
    made for (:func:`nnpack_pool`; the first NNPACK call makes it for the current count). NNPACK's
    Winograd/FFT kernels beat oneDNN's direct convolutions for 3×3 and 5×5 stride-1 layers over
    large maps, on one thread and on two (the app's server, one image at a time); the timings are
    in docs/performance.md, "Measurements behind the code's choices".

    A pool is made once per process: one for two threads (the app's server) serves no one-thread
    caller, so scoring lanes forked from such a process use oneDNN; a pool for one thread starts
    no threads, so lanes forked after it keep NNPACK.
    """
    if not (USE_NNPACK and x.device.type == "cpu" and x.dtype == torch.float32
            and not (torch.is_grad_enabled() and x.requires_grad) and not getattr(_NO_NNPACK, "on", False)):
        return False
    threads = torch.get_num_threads()
    if threads > NNPACK_MAX_THREADS or not _nnpack_ready():
        return False
    if threads > 1 and _cpu_capability() not in NNPACK_MULTI_THREAD_CPUS:
        return False
    pool = nnpack_pool()
    return pool is None or pool == threads


def _nnpack_layer(layer: nn.Module, x: torch.Tensor) -> bool:
    """Whether NNPACK is the faster kernel for ``layer`` on ``x`` (one thread, timed layer by layer):
    stride-1 dense convolutions with at least 16 input channels (the 3-channel first layer of VGG16
    is faster in oneDNN) over maps of at least :data:`NNPACK_MIN_SIDE` px. Smaller maps (AlexNet
    at 64 px, the deep VGG16 layers, AlexNet's 15 px layers in scoring lanes) are slower in NNPACK
    (docs/performance.md, "Measurements behind the code's choices")."""
    if not (isinstance(layer, nn.Conv2d) and layer.stride == (1, 1) and layer.dilation == (1, 1)
            and layer.groups == 1 and layer.in_channels >= 16 and isinstance(layer.padding, tuple)
            and layer.padding_mode == "zeros"):
        return False
    return min(x.shape[-2:]) >= NNPACK_MIN_SIDE


def _max_pool_nchw(x: torch.Tensor, layer: nn.MaxPool2d) -> torch.Tensor | None:
    """``layer(x)`` for a contiguous NCHW ``x`` as a separable maximum over strided views (rows,
    then columns), or ``None`` where ``layer`` is not a plain max-pool. The same values (a maximum
    is exact), in a fraction of the time of PyTorch's own NCHW max-pool kernel on one thread
    (docs/performance.md, "Measurements behind the code's choices")."""
    k, s, p, d = layer.kernel_size, layer.stride, layer.padding, layer.dilation
    if not (isinstance(k, int) and isinstance(s, int) and p in (0, (0, 0)) and d in (1, (1, 1))
            and not layer.ceil_mode and not layer.return_indices and x.dim() == 4):
        return None
    h, w = x.shape[-2:]
    if h < k or w < k:
        return None
    ho, wo = (h - k) // s + 1, (w - k) // s + 1
    rows = torch.maximum(x[..., 0:(ho - 1) * s + 1:s, :], x[..., 1:1 + (ho - 1) * s + 1:s, :])
    for j in range(2, k):
        torch.maximum(rows, x[..., j:j + (ho - 1) * s + 1:s, :], out=rows)
    out = torch.maximum(rows[..., 0:(wo - 1) * s + 1:s], rows[..., 1:1 + (wo - 1) * s + 1:s])
    for j in range(2, k):
        torch.maximum(out, rows[..., j:j + (wo - 1) * s + 1:s], out=out)
    return out


_HOOKS = threading.local()
_NO_NNPACK = threading.local()
_LANE = threading.local()


@contextlib.contextmanager
def lane_thread() -> Iterator[None]:
    """Inside the block, this thread is a scoring lane of its process: torch runs one thread here,
    so :func:`run_layers` takes the one-thread route (the kept Winograd kernels, which run on the
    calling thread), and torch's own NNPACK call is made only if NNPACK's pool was made for one
    thread (the first call would make it for the whole process, and the process's other threads
    may run on more). ``torch.set_num_threads`` also sets the count that threads started later
    begin with: the caller of the lanes restores its own count when they are done
    (:func:`lpips_core.datasets.score.score_pairs` with ``lane_kind="thread"``)."""
    before = getattr(_LANE, "on", False)
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    _LANE.on = True
    try:
        yield
    finally:
        _LANE.on = before


@contextlib.contextmanager
def without_nnpack() -> Iterator[None]:
    """Inside the block, this thread's passes keep oneDNN (:func:`nnpack_conv` says no): for
    features whose few-ulp differences a caller cannot afford (DISTS's fixed target, see
    :meth:`lpips_core.dists.DISTS._fixed_maps`). Blocks nest; other threads are not affected."""
    before = getattr(_NO_NNPACK, "on", False)
    _NO_NNPACK.on = True
    try:
        yield
    finally:
        _NO_NNPACK.on = before


@contextlib.contextmanager
def between_layers(hook: Callable[[], None]) -> Iterator[None]:
    """Inside the block, :func:`run_layers` calls ``hook()`` after every layer of the passes this
    thread makes: a caller's chance to end a long pass early (an exception ``hook`` raises ends
    it; nothing half-computed is cached). The app's Debug page uses it so that a run the user has
    already replaced (a new file uploaded) stops within a layer instead of finishing a VGG16 pass
    of up to a second at 512 px on the cores the new run needs. Blocks nest; other threads and
    processes are not affected."""
    before = getattr(_HOOKS, "hook", None)
    _HOOKS.hook = hook
    try:
        yield
    finally:
        _HOOKS.hook = before


def run_layers(owner: nn.Module, x: torch.Tensor, taps, last: int | None = None) -> list[torch.Tensor]:
    """Run ``x`` through ``owner``'s stack (:func:`layers_for`) and return the outputs of the
    layers whose index is in ``taps``, stopping after layer ``last`` (default: the whole stack).

    When :func:`nnpack_conv` allows it, the pass runs :func:`contiguous_stack` (NNPACK needs
    contiguous weights), the layers :func:`_nnpack_layer` picks are computed by
    ``torch._nnpack_spatial_convolution``, and the pass stays in the contiguous (NCHW) layout:
    the other convolutions get NCHW inputs and contiguous weights, and max-pools run as
    :func:`_max_pool_nchw`: converting to channels-last and back around every NNPACK layer
    would give back much of NNPACK's gain (docs/performance.md, "Measurements behind the code's
    choices").
    Distances stay within 1e-7 of the oneDNN path (tested against the reference package). If
    NNPACK raises, it is not used again in this process and the layer runs as usual.
    """
    if _compiling():
        return _traced_layers(owner, x, taps, last)
    out = []
    hook = getattr(_HOOKS, "hook", None)
    fast = nnpack_conv(x)
    kept = fast and torch.get_num_threads() == 1 and winograd.available()
    # a lane thread makes no NNPACK pool (it would be a one-thread pool for the whole process)
    pooled = fast and not (getattr(_LANE, "on", False) and nnpack_pool() != 1)
    layers = list(contiguous_stack(owner) if fast else layers_for(owner, x))
    skip = -1
    for i, layer in enumerate(layers):
        if i == skip:  # a ReLU already applied by the convolution before it
            y = x
        else:
            y = None
            if kept and winograd.eligible(layer, x):
                fuse = i not in taps and i != last and i + 1 < len(layers) and isinstance(layers[i + 1], nn.ReLU)
                try:
                    y = winograd.conv3x3(layer, x, relu=fuse)
                    skip = i + 1 if fuse else -1
                except RuntimeError:
                    kept = False
            if y is None and pooled and _nnpack_layer(layer, x):
                try:
                    y = _nnpack_call(x.contiguous(), layer.weight, layer.bias, layer.padding)
                except RuntimeError:
                    _NNPACK["failed"], fast = True, False
            elif y is None and fast and isinstance(layer, nn.MaxPool2d) and x.is_contiguous():
                y = _max_pool_nchw(x, layer)
        x = layer(x) if y is None else y
        if hook is not None:
            hook()
        if i in taps:
            out.append(x)
        if i == last:
            break
    return out


def share_with_lanes(model: nn.Module) -> Callable[[], None]:
    """Make here what a one-thread pass through ``model``'s stacks (every submodule with a
    ``features`` stack that :func:`run_layers` runs) makes on first use: the contiguous stack
    and the Winograd kernels it keeps (:func:`lpips_core.winograd.transformed_kernel`), so that
    scoring lanes forked afterwards share them copy-on-write instead of each making its own
    (0.3 s and 0.4 GiB for VGG16, in every lane of every round of an explain). Returns the call
    that drops what this made (what existed before stays)."""
    if not (USE_NNPACK and winograd.available()):
        return lambda: None
    owners, layers = [], []  # the stacks copied here, the layers whose kernels are made here
    for owner in model.modules():
        if not isinstance(getattr(owner, "features", None), nn.Sequential):
            continue
        had_stack = "_contiguous_features" in owner.__dict__
        stack = contiguous_stack(owner)
        if not had_stack and "_contiguous_features" in owner.__dict__:
            owners.append(owner)
        layers += [m for m in stack if winograd.layer_eligible(m) and not winograd.has_kernel(m)]
    # NNPACK transforms a kernel without the GIL: one layer per CPU at a time
    with ThreadPoolExecutor(max(1, min(len(layers), os.cpu_count() or 1))) as pool:
        list(pool.map(winograd.transformed_kernel, layers))

    def drop() -> None:
        for layer in layers:
            winograd.forget(layer)
        for owner in owners:
            owner.__dict__.pop("_contiguous_features", None)
            owner.__dict__.pop("_contiguous_key", None)
    return drop


def _traced_layers(owner: nn.Module, x: torch.Tensor, taps, last: int | None = None) -> list[torch.Tensor]:
    """:func:`run_layers` as ``torch.compile`` traces it, in one graph: ``owner.features`` layer by
    layer, without NNPACK, the between-layers hook or the cached contiguous copy (each reads
    Python-side state: a storage pointer, a thread-local, NNPACK's pool). A pass a gradient will
    flow through convolves with its channels-last weights made contiguous inside the graph, the
    arithmetic :func:`layers_for`'s copy gives in eager mode (and the reference package's)."""
    contiguous = torch.is_grad_enabled() and x.requires_grad
    out = []
    for i, layer in enumerate(owner.features):
        if contiguous and isinstance(layer, nn.Conv2d):
            x = layer._conv_forward(x, layer.weight.contiguous(), layer.bias)
        else:
            x = layer(x)
        if i in taps:
            out.append(x)
        if i == last:
            break
    return out


class Backbone(nn.Module):
    """A frozen torchvision ``features`` stack returning the tapped activations.

    Args:
        net: ``"alex"``, ``"vgg"`` or ``"squeeze"``.
        state_dict: the ``features`` weights in torchvision layout (keys ``"0.weight"`` …);
            entries past the last tap are ignored.
    """

    def __init__(self, net: str, state_dict: dict[str, torch.Tensor]):
        super().__init__()
        if net not in TAPS:
            raise ValueError(f"net must be one of {tuple(TAPS)}, got {net!r}")
        self.net = net
        self.taps = TAPS[net]
        self.layer_names = LAYER_NAMES[net]
        self.first_stride = FIRST_STRIDE[net]
        self.features = _features_architecture(net)
        own = self.features.state_dict()
        missing = [k for k in own if k not in state_dict]
        if missing:
            raise ValueError(f"{net} backbone state dict lacks {missing[:4]}{'…' if len(missing) > 4 else ''}")
        # The meta parameters are replaced by float32 CPU copies of the weights (assign; never the
        # caller's tensors): ``to_empty`` would allocate them first, and its first call imports
        # sympy through torch's meta-tensor references, a cost on the app's cold path (see
        # docs/performance.md, "Measurements behind the code's choices").
        # (load_state_dict still checks every shape against the architecture, assign or not.)
        weights = {k: state_dict[k].detach().to("cpu", torch.float32, copy=True) for k in own}
        self.features.load_state_dict(weights, strict=True, assign=True)
        self.requires_grad_(False)
        self.eval()

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """``x``: ``(N, 3, H, W)`` network input → one ``(N, C_l, H_l, W_l)`` tensor per tap."""
        return run_layers(self, x, frozenset(self.taps))
