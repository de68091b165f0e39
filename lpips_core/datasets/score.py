"""Score pairs of images with many metrics at once: one row per pair, and a summary per metric.

How the work is organised (the same on a CPU and a GPU):

1. The pairs (sorted by key) are cut into **blocks** of ``batch_size`` consecutive pairs, the
   unit of decoding, bucketing, writing, resuming and sharding. A pair's block never depends
   on which other pairs are done or on the shard, so every pair is computed in the same
   network batches in one run, a resumed run and a sharded run: the tables agree bit for bit
   when the networks run on the same kernels (and the batch sizes come from the host's table
   of measured batch sizes, :mod:`lpips_core.batching`). (A process on one torch thread — a scoring lane,
   a Ray actor, a one-CPU job — runs the large convolutions on NNPACK, one on more threads on
   oneDNN: those two agree within ~1e-7, not to the bit.)
2. A ``DataLoader`` decodes blocks in worker processes (:mod:`~lpips_core.datasets.loader`),
   applies the size-mismatch policy and computes the classic metrics (MSE, PSNR, SSIM) there,
   while the main process runs the networks on the previous block.
3. In a block, pairs are bucketed by size; each bucket goes through each **network pass**
   once. Specs that differ only in ``lin`` share a pass (LPIPS lin and baseline of one net and
   version come from the same per-channel terms,
   :meth:`~lpips_core.model.LPIPSBase.pair_channel_terms`). A different version (0.0 skips the
   input scaling), input convention, grayscale or size feeds the network a different input, and
   ST-LPIPS, DISTS and LPIPS have different networks (DISTS's VGG16 pools with L2 pooling), so
   those are separate passes. Each pass batches pairs by the model's ``images_per_batch``
   (both images of a pair in one backbone batch). At native size an LPIPS-like pass takes the
   bucket's ``[0, 1]`` images as the loader stacked them and writes them into the backbone's
   batches with the input convention and the version's scaling layer fused into one
   multiply-add (``input_affine`` of ``pair_channel_terms``; a few float32 ulps from applying
   them in turn, far below the 1e-6 agreement with the single-pair API).
4. A pair that cannot be read, differs in size under ``mismatch="error"``, or is too small for
   a metric becomes a row with ``error_kind`` and ``error``; the summary counts those rows by
   kind and leaves them out of every metric's statistics. A pair over the pixel budget
   (``max_pixels``, :data:`lpips_core.images.DEFAULT_MAX_PIXELS` per image, read from the
   header before decoding) or one that runs out of memory becomes a row of kind ``too_large``,
   and the run goes on.

Summary per metric over the scored rows: ``n``, ``mean``, ``std`` (sample standard deviation,
``ddof=1``) and ``ci95``, the 95 % confidence interval of the mean from Student's t
(``mean ± t₀.₉₇₅(n−1) · std / √n``, :func:`scipy.stats.t.ppf`). Non-finite values (PSNR of
identical images is ``inf``) are counted in ``nonfinite`` and left out of the statistics.
"""

from __future__ import annotations

import contextlib
import copy
import os
import platform
import queue
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from importlib import metadata
from typing import Callable, Iterator, Sequence

import torch
from torch.utils.data import DataLoader, Dataset

from .. import files, metric_registry
from ..backbones import lane_thread, share_with_lanes
from ..caching import memo
from ..conventions import parse_size
from ..devices import resolve_device
from ..model import _numpy_head
from ..spec import MetricSpec, parse_specs
from . import store
from .loader import MISMATCH_POLICIES, Decoded, PairDataset, block_loader, stack_rows
from .pairs import Discovery, Pair, pairs_digest, shard_bounds
from .summary import mean_ci, summarize
from .summary import prepare as prepare_summary

__all__ = ["ScoreResult", "Scorer", "default_block", "mean_ci", "package_versions", "score_pairs", "summarize"]


#: ``(a, b)`` with ``x · a + b`` the input convention applied to an image ``x`` in ``[0, 1]``
#: (:func:`lpips_core.conventions.apply_convention`).
FROM_UNIT: dict[str, tuple[float, float]] = {"[-1,1]": (2.0, -1.0), "[0,1]": (1.0, 0.0), "[0,255]": (255.0, 0.0)}
#: Inputs up to this many pixels (96 × 96) go through a backbone together with the other passes
#: of their bucket that share it (:meth:`Scorer._small_groups`): over their small deep maps a
#: pass reads far more weights than it computes with, once per pass (VGG16 at 64 px in explain).
TOGETHER_MAX_PIXELS = 96 * 96


def default_block(device: torch.device) -> int:
    """Pairs per block: 16 on a CPU, 64 on a GPU."""
    return 16 if device.type == "cpu" else 64


def package_versions() -> dict[str, str]:
    """Versions of the packages a number depends on (for the manifest and ``--json``); a new dict
    on every call, looked up once per process (each lookup scans the installed distributions,
    which is slow next to scoring a small set)."""
    return dict(_package_versions())


@memo(1)
def _package_versions() -> tuple[tuple[str, str], ...]:
    out = {"python": platform.python_version()}
    for dist in ("lpips-explorer", "torch", "torchvision", "numpy", "scipy", "scikit-image", "pillow", "lpips"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return tuple(out.items())


# --------------------------------------------------------------------------- the scorer
class Scorer:
    """Holds the models for a list of specs and scores decoded blocks.

    Args:
        specs: :class:`~lpips_core.spec.MetricSpec` s or their names.
        device: where the networks run (``None``: auto).
        models: ``{MetricSpec: model}`` already built (e.g. the app's cached ones), each under
            its :attr:`~lpips_core.spec.MetricSpec.model_spec` with lin weights (a spec and its
            baseline share one pass, so one model: :meth:`model_key`); others are built on first
            use with :meth:`MetricSpec.build <lpips_core.spec.MetricSpec.build>`.

    Raises:
        ValueError: a bad spec. WeightsUnavailable: a model's weights are missing (on first use).
    """

    def __init__(self, specs: Sequence[MetricSpec | str], *, device: torch.device | str | None = None,
                 models: dict | None = None):
        self.specs = parse_specs(specs)
        self.device = resolve_device(device)
        self.names = tuple(s.name for s in self.specs)
        self.classic = tuple(s.metric for s in self.specs if not s.learned)
        self.passes: dict[tuple, list[MetricSpec]] = {}
        for s in self.specs:
            if s.learned:
                self.passes.setdefault(s.pass_key, []).append(s)
        self._models: dict[MetricSpec, object] = {}
        for k, m in (models or {}).items():
            self._models[_given_key(k)] = _one_backbone(m, self._models.values())
        #: the names of the specs to compute (``None``: all); the others' columns stay ``None``.
        #: A pass shared with a computed spec is still run as a full run would run it (the native
        #: pass that a size equal to the native size takes its values from), so every computed
        #: value equals the one computed with every spec active (explain's race relies on it).
        self.active: frozenset[str] | None = None
        #: ``on_pass(pairs, specs)``, called in the process that runs it after each network pass
        #: of a bucket (or each copy of a twin's values) with the bucket's pair count and the
        #: number of active specs that pass gave values to (explain's progress).
        self.on_pass: Callable[[int, int], None] | None = None
        self._sharing = 0  # nesting depth of shared_with_lanes

    @staticmethod
    def model_key(spec: MetricSpec) -> MetricSpec:
        """The spec the model of ``spec``'s pass is kept under: its ``model_spec`` with lin weights
        (LPIPS lin and baseline come from one model's per-channel terms)."""
        return spec.replace(lin=True).model_spec

    def model(self, spec: MetricSpec):
        """The (cached) model of ``spec``'s metric, net and version, with its lin weights. A model
        built here whose backbone equals one already here (the same network and weights) is
        given that backbone."""
        key = self.model_key(spec)
        if key not in self._models:
            model = key.build(device=self.device)
            if hasattr(model, "shares_backbone"):  # one backbone where the weights are equal (VGG16 0.0 and 0.1):
                for other in self._models.values():  # one contiguous copy, one set of kept kernels
                    if model.shares_backbone(other):
                        model.backbone = other.backbone
                        break
            self._models[key] = model
        return self._models[key]

    def build_all(self) -> None:
        """Build every model now (so missing weights fail before any pair is read)."""
        for specs in self.passes.values():
            self.model(specs[0])

    @contextlib.contextmanager
    def shared_with_lanes(self) -> Iterator[None]:
        """Inside the block, lanes forked from this process share what the models' one-thread
        passes would each make on first use (:func:`lpips_core.backbones.share_with_lanes`: made
        here once, on a CPU, when the block is entered, and dropped when it is left). Blocks
        nest: explain holds one around its rounds, each of which forks its own lanes."""
        if self.device.type != "cpu" or self._sharing:
            self._sharing += 1
            try:
                yield
            finally:
                self._sharing -= 1
            return
        self.build_all()
        drops = [share_with_lanes(self.model(specs[0])) for specs in self.passes.values()]
        self._sharing = 1
        try:
            yield
        finally:
            self._sharing = 0
            for drop in drops:
                drop()

    def sharing(self) -> list[dict]:
        """The network passes per image and the metrics each serves (what is shared)."""
        return [{"network": f"{k[0]} {k[1]}" + (f" v{k[2]}" if k[2] else ""), "input": k[3],
                 "grayscale": k[4], "size": k[5], "metrics": [s.name for s in specs]}
                for k, specs in self.passes.items()]

    def weights(self) -> dict[str, str]:
        """Where each learned metric's weights came from (builds the models)."""
        return {s.name: self.model(s).weights for specs in self.passes.values() for s in specs}

    def _pass(self, specs: list[MetricSpec], a01: torch.Tensor, b01: torch.Tensor) -> dict[str, torch.Tensor]:
        """One network pass of a bucket ``(N, 3, H, W)`` in ``[0, 1]`` → ``{name: (N,)}``."""
        s0 = specs[0]
        model = self.model(s0)
        if hasattr(model, "pair_channel_terms") and s0.size is None and not s0.grayscale:
            # LPIPS-like at native size: the [0, 1] images (decoded here, so already checked)
            # go straight into the backbone's batches, the convention fused with the scaling layer
            convention = metric_registry.correct_convention(s0.metric) if s0.convention in (None, "correct") \
                else s0.convention
            x, y, affine = a01.to(model.device), b01.to(model.device), FROM_UNIT[convention]
        else:
            opts = dict(convention=s0.convention, size=s0.size, grayscale=s0.grayscale, device=model.device)
            x = metric_registry.prepare_input(s0.metric, a01, **opts)
            y = metric_registry.prepare_input(s0.metric, b01, **opts)
            affine = None
        if hasattr(model, "pair_channel_terms"):  # LPIPS-like: lin and baseline from one pass
            return self._heads(specs, model.pair_channel_terms(x, y, input_affine=affine))
        step = max(1, model.images_per_batch(x.shape[-2], x.shape[-1], images=2 * x.shape[0]) // 2)
        total = torch.cat([model.compare(xc, yc, spatial=False).total for xc, yc in zip(x.split(step), y.split(step))])
        return {s.name: total for s in specs}

    def _heads(self, specs: list[MetricSpec], terms: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Each spec's ``(N,)`` distances from its pass's per-layer channel terms (lin or baseline)."""
        weights = self.model(specs[0]).channel_weights
        out = {}
        for s in specs:
            if s.lin:
                out[s.name] = sum(t @ w.cpu() for t, w in zip(terms, weights))
            else:
                out[s.name] = sum(t.sum(1) for t in terms)
        return out

    def _small_groups(self, native: tuple[int, int], shared) -> list[list[tuple[tuple, tuple]]]:
        """The passes of a bucket of ``native``-size images that run together
        (:meth:`~lpips_core.model.LPIPSBase.pair_channel_terms_together`): on a CPU with the NumPy
        head, the first pass of each shared key that resizes or grays its input to at most
        :data:`TOGETHER_MAX_PIXELS`, grouped by input size and by backbone (VGG16 of both
        versions is one). Every such pass is in its group whichever specs are active, so a
        group's batches, and so its values, are the same in every run (explain's race relies on it).
        Each pass is ``(shared key, the first pass key that has it)``."""
        if self.device.type != "cpu" or not _numpy_head(self.device):
            return []
        groups: list[tuple[object, tuple[int, int], list[tuple[tuple, tuple]]]] = []
        firsts: set[tuple] = set()
        for key, specs in self.passes.items():
            key_shared = shared(key)
            if key_shared in firsts:
                continue
            firsts.add(key_shared)
            s0 = specs[0]
            if s0.size is None and not s0.grayscale:  # the native pass with its fused scaling
                continue
            model = self.model(s0)
            if not hasattr(model, "pair_channel_terms_together"):
                continue
            size = native if key_shared[-1] is None else parse_size(key_shared[-1], native)
            if size[0] * size[1] > TOGETHER_MAX_PIXELS:
                continue
            for rep, rep_size, keys in groups:
                if rep_size == size and rep.shares_backbone(model):
                    keys.append((key_shared, key))
                    break
            else:
                groups.append((model, size, [(key_shared, key)]))
        return [keys for _, _, keys in groups if len(keys) > 1]

    def _together(self, keys: list[tuple[tuple, tuple]], a01: torch.Tensor, b01: torch.Tensor
                  ) -> dict[tuple, list[torch.Tensor]]:
        """The channel terms of the passes ``keys`` (one of :meth:`_small_groups`), computed together,
        each input made as :meth:`_pass` makes it."""
        jobs = []
        for _, key in keys:
            s0 = self.passes[key][0]
            model = self.model(s0)
            opts = dict(convention=s0.convention, size=s0.size, grayscale=s0.grayscale, device=model.device)
            jobs.append((model, metric_registry.prepare_input(s0.metric, a01, **opts),
                         metric_registry.prepare_input(s0.metric, b01, **opts)))
        return dict(zip((shared for shared, _ in keys), jobs[0][0].pair_channel_terms_together(jobs)))

    def _bucket(self, ds: list[Decoded]) -> dict[int, dict[str, float]]:
        a01 = stack_rows([d.a for d in ds])
        b01 = stack_rows([d.b for d in ds])
        values: dict[int, dict[str, float]] = {d.index: {} for d in ds}
        native = tuple(a01.shape[-2:])
        seen: dict[tuple, list[MetricSpec]] = {}

        def shared(key: tuple) -> tuple:
            # a size that is this bucket's native size is the native pass: computed once, its
            # values given to both (they differ only in the lin/baseline head)
            size = key[-1] if key[-1] is None or parse_size(key[-1], native) != native else None
            return key[:-1] + (size,)

        active = self.active
        # with some specs inactive: the (shared pass, head) each active spec needs; a pass runs
        # for those only, in the order and on the route a full run takes
        need = None if active is None else {(shared(k), s.lin) for k, specs in self.passes.items()
                                            for s in specs if s.name in active}
        groups = self._small_groups(native, shared)
        group_of = {key: i for i, keys in enumerate(groups) for key, _ in keys}
        together: dict[int, dict | None] = {}
        for key, specs in self.passes.items():
            key_shared = shared(key)
            if need is not None:
                specs = [s for s in specs if (key_shared, s.lin) in need]
                if not specs:
                    continue
            twin = seen.get(key_shared)
            if twin is not None:
                by_lin = {s.lin: s.name for s in twin}
                for d in ds:
                    row = values[d.index]
                    row.update({s.name: row.get(by_lin.get(s.lin)) for s in specs if s.lin in by_lin})
                self._passed(len(ds), [s for s in specs if s.lin in by_lin])
                missing = [s for s in specs if s.lin not in by_lin]
                if not missing:
                    continue
                specs = missing
            seen.setdefault(key_shared, []).extend(specs)
            res = None
            group = group_of.get(key_shared)
            if group is not None and group not in together:
                try:
                    together[group] = self._together(groups[group], a01, b01)
                except Exception as exc:  # the passes then run one by one, each finding its faults
                    if not _pair_fault(exc):
                        raise
                    together[group] = None
            if group is not None and together[group] is not None:
                res = self._heads(specs, together[group][key_shared])
            else:
                try:
                    res = self._pass(specs, a01, b01)
                except Exception as exc:
                    if not _pair_fault(exc) or len(ds) == 1:
                        raise
                    res = None
            if res is None:  # find the pair(s) at fault one by one
                for j, d in enumerate(ds):
                    if d.error_kind:
                        continue
                    try:
                        one = self._pass(specs, a01[j:j + 1], b01[j:j + 1])
                    except Exception as exc:
                        if not _pair_fault(exc):
                            raise
                        d.error_kind, d.error = _kind(exc), f"{specs[0].name}: {' '.join(str(exc).split())}"
                        continue
                    values[d.index].update({k: float(v[0]) for k, v in one.items()})
                self._passed(len(ds), specs)
                continue
            for j, d in enumerate(ds):
                values[d.index].update({k: float(v[j]) for k, v in res.items()})
            self._passed(len(ds), specs)
        return values

    def _passed(self, pairs: int, specs: list[MetricSpec]) -> None:
        if self.on_pass is not None and specs:
            active = self.active
            n = len(specs) if active is None else sum(s.name in active for s in specs)
            if n:
                self.on_pass(pairs, n)

    def score_block(self, items: Sequence[Decoded]) -> list[dict]:
        """Rows (sorted by index) for one block of decoded pairs."""
        buckets: dict[tuple, list[Decoded]] = {}
        for d in items:
            if not d.error_kind:
                buckets.setdefault(tuple(d.a.shape), []).append(d)
        values: dict[int, dict[str, float]] = {}
        for ds in buckets.values():
            if self.passes:
                try:
                    values.update(self._bucket(ds))
                except Exception as exc:  # a bucket of one pair that fails
                    if not _pair_fault(exc):
                        raise
                    ds[0].error_kind, ds[0].error = _kind(exc), " ".join(str(exc).split())
            else:
                values.update({d.index: {} for d in ds})
        rows = []
        for d in sorted(items, key=lambda d: d.index):
            row = {"index": d.index, "key": d.pair.key, "reference": d.pair.reference_name, "test": d.pair.test_name,
                   "reference_size": d.reference_size, "test_size": d.test_size, "error_kind": d.error_kind,
                   "error": d.error}
            ok = not d.error_kind
            v = {**d.classic, **values.get(d.index, {})} if ok else {}
            row.update({name: v.get(name) for name in self.names})
            rows.append(row)
        return rows


def _one_backbone(model, others):
    """``model``, or where its backbone equals one of ``others``' (VGG16 of versions 0.0 and 0.1,
    given as two models: the app's cache) a shallow copy of it that runs that backbone, so that a
    pass serves both and one set of kernels is kept for it (``model`` itself is not changed: the
    caller may share it)."""
    if not hasattr(model, "shares_backbone"):
        return model
    for other in others:
        if getattr(other, "backbone", None) is not None and other.backbone is not model.backbone \
                and model.shares_backbone(other):
            twin = copy.copy(model)
            twin._modules = dict(model._modules)  # the copy's own list of submodules
            twin._modules["backbone"] = other.backbone
            return twin
    return model


def _given_key(key) -> MetricSpec:
    """The spec a model given to :class:`Scorer` is kept under: a ``MetricSpec``'s ``model_spec``
    (the input options play no part in a model; the one looked up has lin weights,
    :meth:`Scorer.model_key`).

    Raises:
        TypeError: any other key.
    """
    if isinstance(key, MetricSpec):
        return key.model_spec
    raise TypeError(f"Scorer's models must be keyed by MetricSpec, got {key!r}")


def _out_of_memory(exc: BaseException) -> bool:
    """A ``MemoryError``, or torch's out-of-memory error (CPU allocator or CUDA)."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text)


def _pair_fault(exc: BaseException) -> bool:
    """Whether ``exc`` is a pair's own fault (a row, and the run goes on): a ``ValueError`` (too
    small for a network) or running out of memory on its images."""
    return isinstance(exc, ValueError) or _out_of_memory(exc)


def _kind(exc: Exception) -> str:
    if _out_of_memory(exc):
        return "too_large"
    return "too-small" if "too small" in str(exc) else "failed"


# --------------------------------------------------------------------------- a whole run
@dataclass(frozen=True)
class ScoreResult:
    """What :func:`score_pairs` gives.

    Attributes:
        rows: one dict per pair of this run's shard, in pair order (columns: ``columns``).
        summary: :func:`summarize` of the rows.
        config: how they were computed (metrics, mismatch policy, blocks, pairs, shard, what
            each network pass serves, the discovery report).
        versions: package versions and each learned metric's weights.
        columns: :data:`~lpips_core.datasets.store.BASE_COLUMNS` + the metric names.
    """

    rows: list[dict]
    summary: dict
    config: dict
    versions: dict
    columns: tuple[str, ...]

    def to_json(self) -> dict:
        """``{"n", "skipped", "skipped_by_reason", "metrics", "config", "versions"}``."""
        return {**self.summary, "config": self.config, "versions": self.versions}


def _sorted_pairs(pairs) -> tuple[list[Pair], dict | None]:
    if isinstance(pairs, Discovery):
        report = pairs.report()
        pairs = pairs.pairs
    else:
        report = None
    pairs = sorted(pairs, key=lambda p: p.key)
    keys = [p.key for p in pairs]
    if len(set(keys)) != len(keys):
        dup = next(k for k, c in Counter(keys).items() if c > 1)
        raise ValueError(f"pair keys must be unique, {dup!r} repeats")
    return pairs, report


def score_pairs(
    pairs: Discovery | Sequence[Pair],
    metrics: Sequence[MetricSpec | str] | str = ("lpips",),
    *,
    mismatch: str = "error", out: str | None = None, resume: bool = False,
    shard: tuple[int, int] | None = None, batch_size: int | None = None, workers: int | None = None,
    device: torch.device | str | None = None, max_side: int | None = None, scorer: Scorer | None = None,
    progress: Callable[[int, int], None] | None = None, lanes: int | None = None,
    max_pixels: int | None = None, force: bool = False, lane_kind: str = "process",
) -> ScoreResult:
    """Score every pair (of shard ``shard``) with every metric; stream rows to ``out``.

    Args:
        pairs: a :class:`~lpips_core.datasets.pairs.Discovery` (its report goes into the config)
            or pairs; they are sorted by key.
        metrics: specs or names, or one comma-separated string (:func:`~.specs.parse_specs`).
        mismatch: ``"error"``, ``"resize"`` or ``"crop"`` (:mod:`~lpips_core.datasets.loader`).
        out: a ``.csv``/``.jsonl`` table to stream rows to (with ``<out>.manifest.json``); it
            must not exist unless ``resume``, and is never a link, FIFO, device or folder.
        resume: continue ``out``: keep its rows, compute the blocks with missing rows.
        shard: ``(i, n)``: score only the ``i``-th of ``n`` contiguous slices of the blocks.
        batch_size: pairs per block (default :func:`default_block`).
        workers: decoding processes when the networks run in this process (``0``: none, and no
            lanes; default: one fewer than the CPUs, 1 to 4).
        lanes: on a CPU, worker processes that each decode *and score* whole blocks, with one
            torch thread each (:func:`default_lanes`; ``0`` or ``1``: none, the networks run here;
            at most one per CPU: a larger number is capped at ``os.cpu_count()``).
            Default ``None``: one per CPU (up to 8) on a CPU device, unless ``workers`` is 0 or
            there is a single block. Single-threaded lanes spend less CPU time on the backbone
            passes than one process on several threads, and each lane decodes while the others
            compute. On one thread the large stride-1 convolutions also run on NNPACK
            (:func:`lpips_core.backbones.run_layers`).
        lane_kind: ``"process"`` (default): lanes are forked worker processes; ``"thread"``:
            threads of this process, one torch thread each, sharing its models and their kept
            kernels. For a process that must not fork (a web server, whose other threads may hold
            locks a child would wait on forever): the app's way. The values are those of process
            lanes (the same one-thread route); ``scorer.on_pass`` and ``progress`` are called in
            the calling thread, which keeps its own torch thread count.
        max_side: downscale images whose longer side exceeds it on load (default ``None``:
            score images at their size, as the reference scripts do).
        max_pixels: the pixel budget per image (default
            :data:`lpips_core.images.DEFAULT_MAX_PIXELS`, 16 MP): an image whose size after
            ``max_side`` would exceed it is refused from its header, unread, and its pair becomes
            a row of kind ``too_large``.
        force: resume a table written with other package versions, weights or device; the
            differences are recorded in the manifest (``run.forced``).
        scorer: a :class:`Scorer` to reuse (its specs and models; ``metrics`` is then ignored);
            default: one built for ``metrics``.
        progress: called with ``(pairs done, pairs of this shard)`` at the start and after each block.

    Returns:
        :class:`ScoreResult`.

    Raises:
        ValueError: bad options, an existing ``out`` without ``resume``, a link, FIFO, device or
            folder as ``out`` (:class:`lpips_core.files.UnsafeFile`), or a ``resume`` of a
            table computed under another configuration, shard, versions, weights or device
            (without ``force``), of a malformed manifest, or of rows that are not these pairs'
            or hold values a scorer cannot write.
        WeightsUnavailable: a learned metric's weights are missing.
    """
    check_lane_kind(lane_kind)
    plan = _plan(pairs, metrics, scorer=scorer, device=device, out=out, resume=resume, mismatch=mismatch,
                 batch_size=batch_size, shard=shard, max_side=max_side, max_pixels=max_pixels)
    done, writer = _open_table(plan, out, force) if out is not None else (set(), None)
    computed = _compute(plan, done, writer, workers=workers, lanes=lanes, progress=progress, lane_kind=lane_kind)
    return _finish(plan, out, computed)


#: How scoring lanes run (:func:`score_pairs`'s ``lane_kind``).
LANE_KINDS = ("process", "thread")


def check_lane_kind(kind: str) -> str:
    """``kind`` if it is one of :data:`LANE_KINDS`.

    Raises:
        ValueError: any other value.
    """
    if kind not in LANE_KINDS:
        raise ValueError(f"lane_kind must be one of {', '.join(LANE_KINDS)}, got {kind!r}")
    return kind


@dataclass(frozen=True)
class _Plan:
    """One run of :func:`score_pairs`, checked and planned before any pair is read.

    Attributes:
        pairs: every pair, sorted by key. scorer: the models (built).
        mismatch, max_side, max_pixels: how pairs are decoded.
        mine: this shard's blocks (ranges of pair indices). my_indices: their pairs' indices.
        columns: the table's columns. config, run, versions: the manifest's parts (``run`` gets
            ``forced`` when a resume goes on over differing versions).
    """

    pairs: list[Pair]
    scorer: Scorer
    mismatch: str
    max_side: int | None
    max_pixels: int
    mine: list[range]
    my_indices: list[int]
    columns: tuple[str, ...]
    config: dict
    run: dict
    versions: dict


def _plan(pairs, metrics, *, scorer, device, out, resume, mismatch, batch_size, shard, max_side,
          max_pixels) -> _Plan:
    """Check :func:`score_pairs`'s options (in its order: budget, pairs, specs, ``out``, mismatch,
    block, shard), cut the sorted pairs into blocks, build the models and say the run's
    configuration (what a resumed table must match)."""
    from ..images import DEFAULT_MAX_PIXELS

    max_pixels = DEFAULT_MAX_PIXELS if max_pixels is None else max_pixels
    if isinstance(max_pixels, bool) or not isinstance(max_pixels, int) or max_pixels < 1:
        raise ValueError(f"max_pixels must be a positive integer, got {max_pixels!r}")
    pairs, report = _sorted_pairs(pairs)
    scorer = scorer or Scorer(metrics, device=device)
    if out is not None:
        store.table_format(out)
        files.check_output(out, exists_ok=True)  # a link, FIFO, device or folder: refused, resume or not
        if not resume and (store.manifest_path(out).exists() or _nonempty(out)):
            raise ValueError(f"{out} exists: pass resume (--resume) to continue it, or remove it")
    if mismatch not in MISMATCH_POLICIES:
        raise ValueError(f"mismatch must be one of {MISMATCH_POLICIES}, got {mismatch!r}")
    block = default_block(scorer.device) if batch_size is None else batch_size
    if not isinstance(block, int) or isinstance(block, bool) or block < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    n = len(pairs)
    blocks = [range(k, min(k + block, n)) for k in range(0, n, block)]
    lo, hi = shard_bounds(len(blocks), shard)
    mine = blocks[lo:hi]
    my_indices = [i for b in mine for i in b]
    scorer.build_all()
    config = {
        "metrics": list(scorer.names),
        "mismatch": mismatch,
        "batch_size": block,
        "max_side": max_side,
        "max_pixels": max_pixels,
        "pairs_total": n,
        "pairs_digest": pairs_digest(pairs),
        "classic_on": "the [0, 1] images after the mismatch policy, native size",
        "std": "sample standard deviation (ddof=1)",
        "ci95": "Student t interval of the mean",
    }
    run = {"shard": list(shard) if shard else None, "pairs": len(my_indices), "device": str(scorer.device),
           "passes": scorer.sharing(), "discovery": report}
    versions = {**package_versions(), "weights": scorer.weights()}
    return _Plan(pairs, scorer, mismatch, max_side, max_pixels, mine, my_indices,
                 store.BASE_COLUMNS + scorer.names, config, run, versions)


def _open_table(plan: _Plan, out: str, force: bool) -> tuple[set[int], "store.RowWriter"]:
    """Open ``out`` for this run: the pair indices it already holds (a resume, checked against
    the plan) and a writer appending to it, after the manifest is written as incomplete."""
    done: set[int] = set()
    if store.manifest_path(out).exists() or _nonempty(out):
        done = _resumed(plan, out, force)
    store.write_manifest(out, {"config": plan.config, "run": plan.run, "versions": plan.versions, "complete": False})
    return done, store.RowWriter(out, plan.columns, append=bool(done))


def _resumed(plan: _Plan, out: str, force: bool) -> set[int]:
    """The pair indices a table being resumed holds, once its manifest and rows are found to be
    this run's (configuration, shard, versions unless ``force``, columns, pairs).

    Raises:
        ValueError: any of them differs; the message says which and what to do.
    """
    old = store.read_manifest(out)
    if old["config"] != plan.config or old["run"].get("shard") != plan.run["shard"]:
        raise ValueError(f"{out} was computed under another configuration or shard; "
                         "use a new output file")
    diff = store.versions_disagree(old["versions"], plan.versions, device_a=old["run"].get("device"),
                                   device_b=plan.run["device"])
    if diff and not force:
        raise ValueError(f"{out} was computed with other packages, weights or device "
                         f"({'; '.join(diff[:3])}); use a new output file, or pass --force to go on")
    forced = [*(old["run"].get("forced") or []), *diff]
    if forced:
        plan.run["forced"] = forced
    cols, old_rows = store.read_rows(out) if _nonempty(out) else (plan.columns, [])
    if cols and tuple(cols) != plan.columns:
        raise ValueError(f"{out} has columns {cols}, expected {plan.columns}")
    store.check_rows(old_rows, plan.scorer.names, total=len(plan.pairs), pairs=plan.pairs, where=str(out))
    mine_set = set(plan.my_indices)
    stray = next((r["index"] for r in old_rows if r["index"] not in mine_set), None)
    if stray is not None:
        raise ValueError(f"{out}: a row has index {stray}, which is not in this shard")
    return {r["index"] for r in old_rows}


def _compute(plan: _Plan, done: set[int], writer, *, workers, lanes, progress, lane_kind="process") -> list[dict]:
    """Score the blocks of this shard with a pair not in ``done``: rows go to ``writer`` (closed at
    the end, whatever happens) or, without one, are returned; ``progress`` after each block."""
    todo = [list(b) for b in plan.mine if not all(i in done for i in b)]
    computed: list[dict] = []
    total = len(plan.my_indices)
    finished = total - sum(len(b) for b in todo)
    if progress:
        progress(finished, total)
    try:
        if todo:
            for rows in _scored(plan, todo, workers, lanes, lane_kind):
                if writer is not None:
                    writer.write(rows)
                else:
                    computed.extend(rows)
                finished += len(rows)
                if progress:
                    progress(finished, total)
    finally:
        if writer is not None:
            writer.close()
    return computed


def _scored(plan: _Plan, todo: list[list[int]], workers, lanes, lane_kind="process"):
    """The rows of each block of ``todo``, in order: scored in lanes (worker processes or threads
    that decode and score whole blocks) on a CPU with more than one, else here, decoded by ``workers``.

    Raises:
        ValueError: a negative ``lanes``.
    """
    scorer = plan.scorer
    dataset = PairDataset(plan.pairs, mismatch=plan.mismatch, classic=scorer.classic, max_side=plan.max_side,
                          max_pixels=plan.max_pixels)
    n_lanes = default_lanes(scorer.device, len(todo), workers) if lanes is None else int(lanes)
    if n_lanes < 0:
        raise ValueError(f"lanes must be ≥ 0, got {lanes!r}")
    n_lanes = min(n_lanes, os.cpu_count() or 1)  # a process per CPU at most
    if n_lanes > 1 and scorer.device.type == "cpu":
        if lane_kind == "thread":
            return _in_threads(scorer, dataset, todo, n_lanes)
        return _in_lanes(scorer, dataset, todo, n_lanes)
    return (scorer.score_block(items) for items in block_loader(dataset, todo, workers=workers))


def _in_lanes(scorer: Scorer, dataset: PairDataset, todo: list[list[int]], lanes: int):
    """The rows of each block of ``todo``, scored in ``lanes`` forked worker processes."""
    with scorer.shared_with_lanes():
        blocks = iter(DataLoader(_ScoredBlocks(dataset, scorer), batch_sampler=todo, num_workers=lanes,
                                 collate_fn=_rows, prefetch_factor=2, persistent_workers=False))
        prepare_summary()  # the lanes are forked and at work: this process would only wait
        yield from blocks


def _in_threads(scorer: Scorer, dataset: PairDataset, todo: list[list[int]], lanes: int):
    """The rows of each block of ``todo``, in order, scored by ``lanes`` threads of this process
    (:func:`lpips_core.backbones.lane_thread`: one torch thread each). The lanes report their
    passes into a queue; ``scorer.on_pass`` is called with them here, in the calling thread (a
    Streamlit page's progress bar can only be drawn from its own thread)."""
    before = torch.get_num_threads()
    report, passes = scorer.on_pass, queue.SimpleQueue()

    def score(block: list[int]) -> list[dict]:
        with lane_thread():
            return scorer.score_block(dataset.decode_here(block))

    def relay() -> None:
        while report is not None:
            try:
                pairs, specs = passes.get_nowait()
            except queue.Empty:
                return
            report(pairs, specs)

    if report is not None:
        scorer.on_pass = lambda pairs, specs: passes.put((pairs, specs))
    with scorer.shared_with_lanes():  # left only once the lanes have stopped
        pool = ThreadPoolExecutor(lanes, thread_name_prefix="lpips-lane")
        try:
            futures = [pool.submit(score, block) for block in todo]
            for future in futures:
                while True:
                    try:
                        rows = future.result(timeout=0.1)
                        break
                    except FutureTimeout:
                        relay()
                relay()
                yield rows
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            scorer.on_pass = report
            torch.set_num_threads(before)  # the count new threads start with, which the lanes set to one


def _finish(plan: _Plan, out: str | None, computed: list[dict]) -> ScoreResult:
    """The run's result: the shard's final rows (read back from ``out`` and written as one table,
    or ``computed``), their summary, and the manifest marked complete."""
    if out is not None:
        _, all_rows = store.read_rows(out)
        rows = store.final_rows(all_rows, plan.my_indices)
        store.write_table(out, plan.columns, rows)
    else:
        rows = store.final_rows(computed)
    summary = summarize(rows, plan.scorer.names)
    if out is not None:
        store.write_manifest(out, {"config": plan.config, "run": plan.run, "versions": plan.versions,
                                   "complete": True, "summary": summary})
    return ScoreResult(rows, summary, {**plan.config, **plan.run}, plan.versions, plan.columns)


def default_lanes(device: torch.device, blocks: int, workers: int | None = None) -> int:
    """Scoring lanes :func:`score_pairs` uses by default: one per CPU (up to 8) on a CPU device
    with at least two blocks to score, unless ``workers`` is 0 (everything in this process);
    else 0."""
    if device.type != "cpu" or blocks < 2 or workers == 0:
        return 0
    cpus = os.cpu_count() or 1
    return min(cpus, 8) if cpus > 1 else 0


class _ScoredBlocks(Dataset):
    """Blocks of ``dataset`` decoded and scored where they are fetched: in a ``DataLoader``
    worker, a lane (forked with the scorer's models, one torch thread: ``DataLoader`` sets it).
    A fetch returns the block's rows."""

    def __init__(self, dataset: PairDataset, scorer: Scorer):
        self.dataset, self.scorer = dataset, scorer

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitems__(self, indices: Sequence[int]) -> list[dict]:
        return self.scorer.score_block(self.dataset.decode_here(indices))


def _rows(rows: list[dict]) -> list[dict]:
    return rows


def _nonempty(path) -> bool:
    return os.path.exists(path) and os.path.getsize(path) > 0
