"""Time lpips_core against the reference ``lpips`` package, side by side, in one process.

Cases (same inputs, same device, same backbone weights for both):

- ``pair-{net}-{size}``: one pair at 64, 256 and 512 px. Reference: ``model(x, y)`` under
  ``torch.no_grad()``; ours: ``LPIPS.forward`` (both images in one backbone batch).
- ``sweep-{net}-256``: 16 distortions of one 256 px reference. Reference: 16 calls; ours: the
  cached-reference batched path (``compare_batch``) with the reference cache emptied before every
  run, so the reference goes through the network once per run, as on a cold page.
  ``sweep-{net}-256-warm``: the same with the reference's features already cached (a slider move).
- ``batch-{net}-256``: 16 pairs of 256 px (crops of the photo against the 16 distortions) in one
  call. Reference: its batched call ``model(x, y)`` (one backbone batch of 16 per side); ours:
  ``LPIPS.forward``, batched as :mod:`lpips_core.batching` measured fastest on this host (the
  agreement check before the timing makes that measurement, or reads it from the host's table).
- ``grid-{net}``: the Conventions page's grid for one 256 px pair (sizes native, 64, 128, 224,
  256 × the six variants). Reference: one call per cell with the matching reference model;
  ours: :func:`lpips_core.sweeps.conventions_grid` (which computes the 256 px cells once, with
  the native ones; so does the floor).
- ``dataset-{net}-256``: 128 generated pairs of 256 px crops of the sample photo (blur, noise,
  JPEG, shift), written as PNG files and scored from disk. Reference: the way its
  ``lpips_2dirs.py`` does it, file by file: load both images (Pillow, ``lpips.im2tensor``), one
  forward per pair; ours: :func:`lpips_core.datasets.score_pairs` over ``match_folders`` with its
  defaults (blocks of 16 pairs; on a CPU, one scoring lane per core: DataLoader worker processes
  that each decode and score whole blocks with one torch thread, see
  ``lpips_core.datasets.score.default_lanes``; both images of a pair in one backbone batch; the
  input mapping and the per-layer head in NumPy, see ``lpips_core.model._numpy_head``; in a lane,
  torch runs one thread, so the large stride-1 convolutions run on NNPACK, see
  ``lpips_core.backbones.run_layers``). Floor:
  the backbone passes over the same blocks and batches, images already decoded and scaled, run
  in the same lanes (their start-up included, as in ours; so NNPACK speeds up the floor too).
- ``allpairs-alex-256``: the mean LPIPS over all 1,128 pairs of 48 seeded 256 px crops of the
  sample photos. Reference: its ``lpips_1dir_allpairs.py`` loop (load each file, then every later
  file, one forward per pair); ours: :func:`lpips_core.space.embed` (one pass per image), the
  blocked Gram matrix, tile by tile, and the jackknife interval (what ``diversity DIR`` runs). Floor: the 48
  images' backbone passes. ``neighbours-alex-256``: each image's 5 nearest others in the same set
  (the same 1,128 reference forwards, then sorting; ours :func:`lpips_core.space.nearest`).
  ``--only allpairs`` runs these two.
- ``grad-{net}-256``: a training step: forward and backward of a batch of 4 pairs of 256 px
  (seeded crops and distortions, as in the ``batch`` case), only ``x`` requiring grad (a loss against fixed targets), the
  distances summed. Reference: ``ref(x, y).sum().backward()``; ours: ``model(x, y,
  reduction="sum").backward()``; beside them torchmetrics' and piq's LPIPS where installed
  (holding the same weights; ``peers`` in the results, in seconds, and ``notes`` when one is
  missing or cannot run here). Floor: the backbone's forward and backward (to its input) over the
  four ``x`` with the gradient path's contiguous weights, and its forward over the four targets
  without a graph, inputs scaled beforehand. Gradients are checked too (1e-6).
  ``grad-alex-256-compiled``: the same step through ``torch.compile`` (inductor), ours and the
  reference compiled the same way, after the warm-up that compiles them; the floor stays eager.
  Where compiling is impossible (no C++ compiler) the case is skipped with the reason (``notes``).
- floor (every case): the bare backbone forward passes the path must do for the same images —
  the torchvision ``features`` stack alone, on already prepared and scaled inputs, batched as our
  path batches them (``LPIPS.images_per_batch``). No LPIPS implementation can beat it.

Every case first checks that both give the same numbers (1e-5 absolute), then times medians over
``--repeat`` rounds in which reference, ours and floor run in turn (interleaved, so that the
machine's slow spells hit all three alike). ``speedup = reference_s / ours_s`` and ``over_floor = ours_s / floor_s``.
Peak memory: CUDA's max allocated bytes per run on a GPU; on the CPU the peak resident set
sampled every millisecond during the run, minus the resident set before it.

    python benchmarks/bench.py [--device cpu|cuda] [--repeat 5] [--json] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lpips_core import LPIPS  # noqa: E402
from lpips_core.conventions import to_input  # noqa: E402
from lpips_core.datasets import Scorer, match_folders, score_pairs  # noqa: E402
from lpips_core.datasets.score import default_block, default_lanes  # noqa: E402
from lpips_core.spec import MetricSpec  # noqa: E402
from lpips_explorer.distortions import gaussian_blur, gaussian_noise, jpeg, shift  # noqa: E402
from lpips_core.images import load_image  # noqa: E402
from lpips_core.sweeps import _VARIANT_CONFIG, VARIANTS, conventions_grid, size_label  # noqa: E402
from lpips_core.testing import reference_lpips as reference_model  # noqa: E402
from machine import machine_info  # noqa: E402  (benchmarks/machine.py, beside this file)

TOL = 1e-5
GRID_SIZES = (None, 64, 128, 224, 256)


@dataclass
class Case:
    name: str
    reference_s: float
    ours_s: float
    floor_s: float
    speedup: float
    over_floor: float
    max_abs_diff: float
    reference_peak_mb: float
    ours_peak_mb: float
    floor_peak_mb: float
    #: other packages' median seconds on the same work (``grad-*`` cases: torchmetrics, piq)
    peers: dict = field(default_factory=dict)
    #: each timed function's spread over the repeats, ``(slowest − fastest) / median``
    #: (``reference``, ``ours``, ``floor``): a case whose spread exceeds 0.10 is not stable here
    spread: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- measuring
def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20


class _PeakSampler:
    """Peak resident set above the starting point, sampled in a thread (CPU runs)."""

    def __enter__(self):
        self.base = self.peak = _rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_mb())
            time.sleep(0.001)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mb())
        self.mb = self.peak - self.base


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def measure(fns: dict[str, Callable[[], object]], device: torch.device, repeat: int) -> dict[str, tuple[float, float, float]]:
    """Per function: (median seconds, peak MB, spread). The functions run interleaved, one run of
    each per round after a warm-up round, so a slow spell of the machine hits all of them alike;
    the spread is ``(slowest − fastest) / median`` over the timed rounds."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for round_ in range(repeat + 1):
        for name, fn in fns.items():
            _sync(device)
            t0 = time.perf_counter()
            fn()
            _sync(device)
            if round_:
                times[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(times[name]), _peak_mb(fn, device),
                   (max(times[name]) - min(times[name])) / statistics.median(times[name]))
            for name, fn in fns.items()}


def _peak_mb(fn: Callable[[], object], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fn()
        _sync(device)
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    if Path("/proc/self/statm").exists():
        with _PeakSampler() as s:
            fn()
        return s.mb
    return float("nan")


# --------------------------------------------------------------------------- inputs
def photo(side: int) -> np.ndarray:
    """The astronaut sample photo, resized to ``side × side``, (H, W, 3) float32 in [0, 1]."""
    img = load_image(REPO / "sample_images" / "astronaut.png").array
    return to_input(img, convention="[0,1]", size=side)[0].permute(1, 2, 0).numpy().copy()


def distortions16(img: np.ndarray) -> list[np.ndarray]:
    out = [shift(img, d, boundary="reflect") for d in (1, 2, 3, 4)]
    out += [gaussian_blur(img, s) for s in (0.5, 1.0, 1.5, 2.0)]
    out += [gaussian_noise(img, s, seed=i) for i, s in enumerate((0.02, 0.05, 0.1, 0.2))]
    out += [jpeg(img, q) for q in (10, 30, 50, 90)]
    return out


# --------------------------------------------------------------------------- the floor
def floor_pairs(model: LPIPS, x_in: torch.Tensor, y_in: torch.Tensor) -> None:
    """Bare backbone passes over scaled pairs, batched as ``LPIPS._pair_chunks`` batches them."""
    per = model.images_per_batch(x_in.shape[-2], x_in.shape[-1], images=2 * len(x_in))
    if per < 2:
        for xc, yc in zip(x_in.split(1), y_in.split(1)):
            model.backbone(xc)
            model.backbone(yc)
        return
    for xc, yc in zip(x_in.split(per // 2), y_in.split(per // 2)):
        model.backbone(torch.cat([xc, yc]))


class _FloorBlocks(Dataset):
    """The floor of a dataset case in lanes: fetching a block (a list of consecutive pair indices)
    runs :func:`floor_pairs` over its already scaled images, in the ``DataLoader`` worker."""

    def __init__(self, model: LPIPS, x_in: torch.Tensor, y_in: torch.Tensor):
        self.model, self.x_in, self.y_in = model, x_in, y_in

    def __len__(self) -> int:
        return len(self.x_in)

    def __getitems__(self, indices: list[int]) -> int:
        lo, hi = indices[0], indices[-1] + 1
        with torch.inference_mode():
            floor_pairs(self.model, self.x_in[lo:hi], self.y_in[lo:hi])
        return hi - lo


def _identity(x):
    return x


def floor_many(model: LPIPS, batch_in: torch.Tensor) -> None:
    """Bare backbone passes over scaled images, batched as ``LPIPS.compare_batch`` batches them."""
    for chunk in batch_in.split(model.images_per_batch(batch_in.shape[-2], batch_in.shape[-1], images=len(batch_in))):
        model.backbone(chunk)


# --------------------------------------------------------------------------- cases
def _forward_case(name: str, x: torch.Tensor, y: torch.Tensor, ours, ref, device, repeat) -> Case:
    """``ref(x, y)`` against ``ours(x, y)`` (``LPIPS.forward``) on the same pairs; the floor is the
    bare backbone passes over both sides, scaled beforehand."""

    def run_ref():
        with torch.no_grad():
            return ref(x, y).flatten()

    x_in, y_in = (x - ours.shift) / ours.scale, (y - ours.shift) / ours.scale

    def run_floor():
        with torch.inference_mode():
            floor_pairs(ours, x_in, y_in)

    diff = float((ours(x, y).cpu() - run_ref().cpu()).abs().max())
    return _case(name, diff, run_ref, lambda: ours(x, y), run_floor, device, repeat)


def pair_case(net, size, ours, ref, device, repeat) -> Case:
    a = photo(size)
    x = to_input(a, device=device)
    y = to_input(gaussian_blur(a, 1.5), device=device)
    return _forward_case(f"pair-{net}-{size}", x, y, ours, ref, device, repeat)


def sweep_case(net, ours, ref, device, repeat, *, warm: bool) -> Case:
    a = photo(256)
    x = to_input(a, device=device)
    batch = torch.cat([to_input(d) for d in distortions16(a)]).to(device)

    def run_ref():
        with torch.no_grad():
            return torch.cat([ref(x, batch[i:i + 1]).flatten() for i in range(len(batch))])

    def run_ours():
        if not warm:
            ours.ref_cache.clear()
        return ours.compare_batch(x, batch).total

    x_in, batch_in = (x - ours.shift) / ours.scale, (batch - ours.shift) / ours.scale

    def run_floor():
        with torch.inference_mode():
            if not warm:
                ours.backbone(x_in)
            floor_many(ours, batch_in)

    diff = float((run_ours() - run_ref().cpu()).abs().max())
    name = f"sweep-{net}-256" + ("-warm" if warm else "")
    return _case(name, diff, run_ref, run_ours, run_floor, device, repeat)


def grid_case(net, ours_by_version, refs, device, repeat) -> Case:
    a = photo(256)
    b = gaussian_blur(a, 1.5)
    keys = {ver: [] for ver in ("0.1", "0.0")}
    for v in VARIANTS:
        conv, ver, _, gray = _VARIANT_CONFIG[v]
        if (conv, gray) not in keys[ver]:
            keys[ver].append((conv, gray))

    def run_ref():
        out = {}
        with torch.no_grad():
            for size in GRID_SIZES:
                for v in VARIANTS:
                    conv, ver, lin, gray = _VARIANT_CONFIG[v]
                    x = to_input(a, convention=conv, size=size, grayscale=gray, device=device)
                    y = to_input(b, convention=conv, size=size, grayscale=gray, device=device)
                    out[(v, size_label(size))] = float(refs[(ver, lin)](x, y))
        return out

    def run_ours():
        cells = conventions_grid(a, b, get_model=lambda spec: ours_by_version[spec.version], nets=(net,),
                                 sizes=GRID_SIZES)
        return {(c.variant, c.size_label): c.value for c in cells}

    prepared, shapes = [], set()
    for size in GRID_SIZES:  # a size equal to the native one is computed once, as conventions_grid does
        shape = (a.shape[0], a.shape[1]) if size is None else (size, size)
        if shape in shapes:
            continue
        shapes.add(shape)
        for ver, ks in keys.items():
            m = ours_by_version[ver]
            xs, ys = (torch.cat([to_input(img, convention=c, size=size, grayscale=g, device=device) for c, g in ks])
                      for img in (a, b))
            if ver == "0.1":
                xs, ys = (xs - m.shift) / m.scale, (ys - m.shift) / m.scale
            prepared.append((m, xs, ys))

    def run_floor():
        with torch.inference_mode():
            for m, xs, ys in prepared:
                floor_pairs(m, xs, ys)

    r, o = run_ref(), run_ours()
    diff = max(abs(r[k] - o[k]) for k in r)
    return _case(f"grid-{net}", diff, run_ref, run_ours, run_floor, device, repeat)


BATCH_PAIRS = 16


def batch_pairs(n: int = BATCH_PAIRS, side: int = 256, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` pairs of ``side`` px in ``[-1, 1]``: seeded crops of the photo at 2 × ``side`` against
    the 16 distortions, one each."""
    big = photo(2 * side)
    rng = np.random.default_rng(1)
    crops = [np.ascontiguousarray(big[t:t + side, l:l + side]) for t, l in rng.integers(0, side, size=(n, 2))]
    x = torch.cat([to_input(c) for c in crops]).to(device)
    y = torch.cat([to_input(distortions16(c)[i % 16]) for i, c in enumerate(crops)]).to(device)
    return x, y


def batch_case(net, ours, ref, device, repeat, side: int = 256, n: int = BATCH_PAIRS) -> Case:
    """``n`` pairs of ``side`` px in one call (:func:`batch_pairs`). Reference: its batched call
    ``ref(x, y)`` (each side one backbone batch of ``n``); ours: ``LPIPS.forward`` (batches of the
    size :mod:`lpips_core.batching` measured fastest on this host, both sides of a pair in one batch)."""
    x, y = batch_pairs(n, side, device)
    return _forward_case(f"batch-{net}-{side}", x, y, ours, ref, device, repeat)


GRAD_PAIRS = 4
GRAD_TOL = 1e-6


def _train_step(loss: Callable, x: torch.Tensor, y: torch.Tensor) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """One training step of ``loss(x, y) → 0-d``: ``x`` (a fresh leaf) requires grad, ``y`` does not;
    returns ``(loss, x.grad)``."""
    def run():
        xg = x.clone().requires_grad_()
        value = loss(xg, y)
        value.backward()
        return value.detach(), xg.grad
    return run


def _hold_backbone(lpips_like, net: str) -> None:
    """Give an ``lpips``-style module (``.net.sliceK.<features index>``) our backbone weights, as
    :func:`lpips_core.testing.reference_lpips` gives the reference's."""
    from lpips_core.weights import load_backbone_weights

    sd = load_backbone_weights(net).state_dict
    own = {}
    for name, module in lpips_like.net.named_modules():
        parts = name.split(".")
        if len(parts) == 2 and parts[0].startswith("slice"):
            for pname, _ in module.named_parameters(recurse=True):
                own[f"{name}.{pname}"] = sd[f"{parts[1]}.{pname}"]
    lpips_like.net.load_state_dict(own, strict=True)


def peer_losses(net: str, device) -> tuple[dict[str, Callable], dict[str, str]]:
    """The other packages' LPIPS as a summed loss on ``[-1, 1]`` inputs, where installed, holding
    our backbone weights: torchmetrics' ``_LPIPS`` (the reference's code, its own lin files) and
    piq's ``LPIPS`` (VGG16 only; its weights come from a download). Returns ``(losses, notes)``:
    a note says why a package is missing or cannot run here."""
    import importlib.util

    losses, notes = {}, {}
    if importlib.util.find_spec("torchmetrics") is None:
        notes["torchmetrics"] = "not installed"
    else:
        try:
            from torchmetrics.functional.image.lpips import _LPIPS

            tm = _LPIPS(pretrained=True, net=net, pnet_rand=True).eval().to(device)
            _hold_backbone(tm, net)
            tm.requires_grad_(False)
            losses["torchmetrics"] = lambda a, b: tm(a, b).sum()
        except Exception as exc:  # noqa: BLE001 - a peer that cannot run is reported, not fatal
            notes["torchmetrics"] = f"cannot run here: {type(exc).__name__}: {exc}"[:300]
    if importlib.util.find_spec("piq") is None:
        notes["piq"] = "not installed"
    elif net != "vgg":
        notes["piq"] = "its LPIPS is VGG16 only"
    else:
        try:
            import piq

            pq = piq.LPIPS(reduction="sum").to(device)
            losses["piq"] = lambda a, b: pq((a + 1) / 2, (b + 1) / 2)  # piq takes [0, 1] images
        except Exception as exc:  # noqa: BLE001
            notes["piq"] = f"cannot run here: {type(exc).__name__}: {exc}"[:300]
    return losses, notes


def grad_case(net, ours, ref, device, repeat, *, compiled: bool = False, notes: dict | None = None) -> Case | None:
    """``grad-{net}-256`` (``-compiled``): forward + backward of :data:`GRAD_PAIRS` pairs of 256 px,
    only ``x`` requiring grad (see the module docstring). Values within :data:`TOL` and gradients
    within :data:`GRAD_TOL` of the reference's before timing; a peer that disagrees is not timed.
    With ``compiled``, returns ``None`` (and says why in ``notes``) where ``torch.compile`` fails."""
    name = f"grad-{net}-256" + ("-compiled" if compiled else "")
    notes = {} if notes is None else notes
    x, y = batch_pairs(GRAD_PAIRS, 256, device)

    def ref_loss(a, b):
        return ref(a, b).sum()

    def ours_loss(a, b):
        return ours(a, b, reduction="sum")

    peers: dict[str, Callable] = {}
    if compiled:
        import torch._dynamo as dynamo

        dynamo.reset()
        ref_loss, ours_loss = torch.compile(ref_loss), torch.compile(ours_loss)
    else:
        peers, why = peer_losses(net, device)
        notes.update({f"{name} {k}": v for k, v in why.items()})
    run_ref, run_ours = _train_step(ref_loss, x, y), _train_step(ours_loss, x, y)
    try:
        (rv, rg), (ov, og) = run_ref(), run_ours()  # compiles, when compiled
    except Exception as exc:  # noqa: BLE001 - no C++ compiler, an unsupported platform
        if not compiled:
            raise
        notes[name] = f"skipped: torch.compile failed here: {type(exc).__name__}: {str(exc)[:300]}"
        return None
    diff, gdiff = float((ov - rv).abs()), float((og - rg).abs().max())
    if not gdiff <= GRAD_TOL:
        raise SystemExit(f"{name}: our gradient and the reference's differ by {gdiff:.2e} > {GRAD_TOL:g}; not timing")
    for peer, loss in list(peers.items()):
        pv, pg = _train_step(loss, x, y)()
        if not (float((pv - rv).abs()) <= TOL and float((pg - rg).abs().max()) <= GRAD_TOL):
            notes[f"{name} {peer}"] = "disagrees with the reference beyond 1e-5 / 1e-6: not timed"
            del peers[peer]
    x_in, y_in = (x - ours.shift) / ours.scale, (y - ours.shift) / ours.scale

    def run_floor():
        xg = x_in.clone().requires_grad_()
        sum(t.sum() for t in ours.backbone(xg)).backward()
        with torch.no_grad():
            ours.backbone(y_in)

    return _case(name, max(diff, gdiff), run_ref, run_ours, run_floor, device, repeat,
                 peers={k: _train_step(v, x, y) for k, v in peers.items()})


DATASET_PAIRS = 128


def write_dataset(root: Path, n: int = DATASET_PAIRS, side: int = 256) -> tuple[Path, Path]:
    """``root/a/NNN.png`` (seeded ``side`` px crops of the photo at 2 × ``side``) and ``root/b/NNN.png``
    (each distorted: blur, noise, JPEG or a shift, in turn)."""
    from PIL import Image

    big = photo(2 * side)
    rng = np.random.default_rng(0)
    (root / "a").mkdir(parents=True, exist_ok=True)
    (root / "b").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        top, left = rng.integers(0, side, size=2)
        a = np.ascontiguousarray(big[top:top + side, left:left + side])
        b = (gaussian_blur(a, 0.5 + (i % 7) / 3), gaussian_noise(a, 0.02 + (i % 5) / 50, seed=i),
             jpeg(a, 10 + 10 * (i % 8)), shift(a, 1 + i % 4, boundary="reflect"))[i % 4]
        for img, d in ((a, "a"), (b, "b")):
            Image.fromarray(np.round(img * 255).astype(np.uint8)).save(root / d / f"{i:03d}.png")
    return root / "a", root / "b"


def scaled_inputs(model: LPIPS, dir_a: Path, dir_b: Path, names, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """The floor's inputs: each side's files ``names``, decoded and scaled for ``model``'s backbone,
    ``(n, 3, H, W)`` each."""
    decoded = [torch.cat([to_input(load_image(d / name).array, device=device) for name in names])
               for d in (dir_a, dir_b)]
    return tuple((t - model.shift) / model.scale for t in decoded)


def dataset_case(net, ours, ref, device, repeat, root: Path) -> Case:
    import lpips
    from PIL import Image

    dir_a, dir_b = write_dataset(root)
    names = sorted(p.name for p in dir_a.iterdir())

    def run_ref():  # lpips_2dirs.py: for each file, load both, one forward
        out = []
        with torch.no_grad():
            for name in names:
                x = lpips.im2tensor(np.asarray(Image.open(dir_a / name).convert("RGB"))).to(device)
                y = lpips.im2tensor(np.asarray(Image.open(dir_b / name).convert("RGB"))).to(device)
                out.append(float(ref(x, y)))
        return torch.tensor(out, dtype=torch.float64)

    scorer = Scorer([f"lpips-{net}"], device=device, models={MetricSpec("lpips", net, "0.1"): ours})

    def run_ours():
        res = score_pairs(match_folders(dir_a, dir_b), scorer=scorer)
        return torch.tensor([r[scorer.names[0]] for r in res.rows], dtype=torch.float64)

    block = default_block(device)
    x_in, y_in = scaled_inputs(ours, dir_a, dir_b, names, device)
    blocks = [list(range(i, min(i + block, len(names)))) for i in range(0, len(names), block)]
    lanes = default_lanes(torch.device(device), len(blocks))

    def run_floor():  # the same blocks, in as many lanes as ours uses (forked, one torch thread each)
        if lanes > 1:
            for _ in DataLoader(_FloorBlocks(ours, x_in, y_in), batch_sampler=blocks, num_workers=lanes,
                                collate_fn=_identity, prefetch_factor=2, persistent_workers=False):
                pass
            return
        with torch.inference_mode():
            for xb, yb in zip(x_in.split(block), y_in.split(block)):
                floor_pairs(ours, xb, yb)

    diff = float((run_ours() - run_ref()).abs().max())
    return _case(f"dataset-{net}-256", diff, run_ref, run_ours, run_floor, device, repeat)


# --------------------------------------------------------------------------- LPIPS space (all pairs, neighbours)
SPACE_IMAGES = 48


def write_space_set(root: Path, n: int | None = None, side: int = 256, seed: int = 0) -> Path:
    """``root/NNN.png``: ``n`` seeded ``side`` px crops of the sample photos at 2 × ``side`` (a
    different photo and place each time), as a folder of generated samples would be."""
    from PIL import Image

    n = SPACE_IMAGES if n is None else n
    photos = sorted((REPO / "sample_images").glob("*.png"))
    big = [to_input(load_image(p).array, convention="[0,1]", size=2 * side)[0].permute(1, 2, 0).numpy()
           for p in photos]
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        top, left = rng.integers(0, side, size=2)
        crop = big[i % len(big)][top:top + side, left:left + side]
        Image.fromarray(np.round(crop * 255).astype(np.uint8)).save(root / f"{i:03d}.png")
    return root


def reference_allpairs(ref, folder: Path, device) -> dict[tuple[str, str], float]:
    """The reference's ``lpips_1dir_allpairs.py --all-pairs`` loop: for each file, load it, then
    load every later file and run one forward per pair (Pillow decoding, ``lpips.im2tensor``)."""
    import lpips
    from PIL import Image

    files = sorted(p.name for p in folder.iterdir())
    out = {}
    with torch.no_grad():
        for ff, file0 in enumerate(files[:-1]):
            img0 = lpips.im2tensor(np.asarray(Image.open(folder / file0).convert("RGB"))).to(device)
            for file1 in files[ff + 1:]:
                img1 = lpips.im2tensor(np.asarray(Image.open(folder / file1).convert("RGB"))).to(device)
                out[(file0, file1)] = float(ref(img0, img1))
    return out


def _space_floor(ours: LPIPS, folder: Path, device):
    """The floor of both space cases: the backbone passes over the set's images, decoded and
    scaled beforehand, batched as :func:`lpips_core.space.embed` batches them."""
    names = sorted(p.name for p in folder.iterdir())
    x = torch.cat([to_input(load_image(folder / n).array, device=device) for n in names])
    x_in = (x - ours.shift) / ours.scale

    def run_floor():
        with torch.inference_mode():
            floor_many(ours, x_in)

    return run_floor


def allpairs_case(ours, ref, device, repeat, folder: Path) -> Case:
    """``allpairs-alex-256``: the mean LPIPS over all 1,128 pairs of 48 images at 256 px (the
    reference's per-pair loop against ``diversity``'s path: :func:`lpips_core.space.embed`, the
    blocked Gram matrix, the jackknife interval)."""
    from lpips_core import space

    names = sorted(p.name for p in folder.iterdir())

    def run_ours():
        return space.diversity(space.embed(ours, folder), device=device)

    stats = run_ours()
    d = space.pairwise_distances(space.embed(ours, folder))
    ref_values = reference_allpairs(ref, folder, device)
    diff = max(abs(d[names.index(a), names.index(b)] - v) for (a, b), v in ref_values.items())
    diff = max(diff, abs(stats["mean"] - float(np.mean(list(ref_values.values())))))
    return _case("allpairs-alex-256", diff, lambda: reference_allpairs(ref, folder, device), run_ours,
                 _space_floor(ours, folder, device), device, repeat)


def neighbours_case(ours, ref, device, repeat, folder: Path, k: int = 5) -> Case:
    """``neighbours-alex-256``: each of the 48 images' 5 nearest others (dedup within one folder).
    Reference: the same 1,128 forwards as ``allpairs``, then each image's distances sorted
    (nearest first, ties by name); ours: :func:`lpips_core.space.nearest` of the embedding in itself."""
    from lpips_core import space

    names = sorted(p.name for p in folder.iterdir())

    def run_ref():
        vals = reference_allpairs(ref, folder, device)
        full = {**vals, **{(b, a): v for (a, b), v in vals.items()}}
        return {q: sorted(((full[(q, o)], o) for o in names if o != q))[:k] for q in names}

    def run_ours():
        emb = space.embed(ours, folder)
        return space.nearest(emb, emb, k, device=device)

    r, o = run_ref(), run_ours()
    diff = 0.0
    for i, q in enumerate(names):
        if [names[j] for j in o.indices[i] if j >= 0] != [n for _, n in r[q]]:
            raise SystemExit(f"neighbours-alex-256: the neighbours of {q} differ: {o.indices[i]} vs {r[q]}")
        diff = max([diff] + [abs(a - v) for a, (v, _) in zip(o.distances[i], r[q])])
    return _case("neighbours-alex-256", diff, run_ref, run_ours, _space_floor(ours, folder, device), device, repeat)


def _case(name, diff, run_ref, run_ours, run_floor, device, repeat, peers: dict | None = None) -> Case:
    """Time a case whose numbers agree; ``peers`` (name → run) are timed in the same rounds."""
    if not diff <= TOL:
        raise SystemExit(f"{name}: ours and the reference differ by {diff:.2e} > {TOL:g}; not timing")
    peers = peers or {}
    m = measure({"reference": run_ref, "ours": run_ours, "floor": run_floor, **peers}, device, repeat)
    (ref_s, ref_mb, _), (ours_s, ours_mb, _), (floor_s, floor_mb, _) = m["reference"], m["ours"], m["floor"]
    return Case(name, ref_s, ours_s, floor_s, ref_s / ours_s, ours_s / floor_s, diff, ref_mb, ours_mb, floor_mb,
                {k: m[k][0] for k in peers}, {k: round(m[k][2], 4) for k in ("reference", "ours", "floor")})


# --------------------------------------------------------------------------- main
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeat", type=int, default=7, help="timed rounds per case (median)")
    p.add_argument("--nets", default="alex,vgg")
    p.add_argument("--quick", action="store_true", help="pairs at 64 and 256 only, 3 repeats")
    p.add_argument("--only", default="", help="comma-separated case-name prefixes to run")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    repeat = 3 if args.quick else args.repeat
    sizes = (64, 256) if args.quick else (64, 256, 512)
    wanted = tuple(s for s in args.only.split(",") if s)

    def want(name: str) -> bool:
        return not wanted or name.startswith(wanted)

    cases: list[Case] = []
    notes: dict[str, str] = {}  # case (and peer) → why it was skipped or not timed
    nets = args.nets.split(",")
    # The dataset cases run first: their lanes are forked from this process and use NNPACK on one
    # thread, which they cannot once this process has made NNPACK's pool for two threads (its first
    # NNPACK call on two threads, in any other case; see lpips_core.backbones.nnpack_pool).
    for net in nets:
        if want(f"dataset-{net}-256"):
            import tempfile

            ours, ref = LPIPS(net, "0.1", True, device=device), reference_model(net, "0.1", True).to(device)
            with tempfile.TemporaryDirectory() as tmp:  # VGG16: about a minute per run on 2 CPU cores
                r = max(1, repeat // 3) if net == "vgg" else repeat
                cases.append(dataset_case(net, ours, ref, device, r, Path(tmp)))
            _progress(cases[-1])
    # The LPIPS-space cases run together (one image set, one model): --only allpairs runs both.
    if want("allpairs-alex-256") or want("neighbours-alex-256"):
        import tempfile

        ours, ref = LPIPS("alex", "0.1", True, device=device), reference_model("alex", "0.1", True).to(device)
        with tempfile.TemporaryDirectory() as tmp:  # the reference: ~1,128 forwards a run
            folder = write_space_set(Path(tmp) / "set")
            r = max(1, repeat // 3)
            cases.append(allpairs_case(ours, ref, device, r, folder))
            _progress(cases[-1])
            cases.append(neighbours_case(ours, ref, device, r, folder))
            _progress(cases[-1])
    for net in nets:
        ours = {ver: LPIPS(net, ver, True, device=device) for ver in ("0.1", "0.0")}
        refs = {(ver, lin): reference_model(net, ver, lin).to(device) for ver in ("0.1", "0.0") for lin in (True, False)}
        for size in sizes:
            if want(f"pair-{net}-{size}"):
                # the expensive VGG 512 px pair gets fewer repeats
                r = max(1, repeat // 2) if (net == "vgg" and size == 512) else repeat
                cases.append(pair_case(net, size, ours["0.1"], refs[("0.1", True)], device, r))
                _progress(cases[-1])
        for warm in (False, True):
            if want(f"sweep-{net}"):
                cases.append(sweep_case(net, ours["0.1"], refs[("0.1", True)], device, repeat, warm=warm))
                _progress(cases[-1])
        if want(f"batch-{net}-256"):
            r = max(1, repeat // 2) if net == "vgg" else repeat
            cases.append(batch_case(net, ours["0.1"], refs[("0.1", True)], device, r))
            _progress(cases[-1])
        if want(f"grid-{net}"):
            cases.append(grid_case(net, ours, refs, device, max(1, repeat // 2) if net == "vgg" else repeat))
            _progress(cases[-1])
        if want(f"grad-{net}-256"):
            r = max(1, repeat // 3) if net == "vgg" else repeat
            for compiled in (False, True) if net == "alex" else (False,):
                if compiled and not want("grad-alex-256-compiled"):
                    continue
                case = grad_case(net, ours["0.1"], refs[("0.1", True)], device, r, compiled=compiled, notes=notes)
                if case is None:
                    print(f"  grad-{net}-256-compiled: {notes[f'grad-{net}-256-compiled']}", file=sys.stderr, flush=True)
                    continue
                cases.append(case)
                _progress(cases[-1])

    result = {
        "device": str(device) if device.type != "cuda" else f"cuda ({torch.cuda.get_device_name(device)})",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "repeat": repeat,
        "machine": machine_info(),
        "cases": [asdict(c) for c in cases],
        "notes": notes,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"\ndevice {result['device']}, torch {result['torch']}, {result['threads']} threads, median of {repeat}")
        print(f"{'case':<22}{'reference s':>12}{'ours s':>10}{'floor s':>10}{'speedup':>9}{'/floor':>8}{'diff':>10}"
              f"{'MB ref/ours':>14}{'spread':>8}")
        for c in cases:
            print(f"{c.name:<22}{c.reference_s:>12.4f}{c.ours_s:>10.4f}{c.floor_s:>10.4f}{c.speedup:>9.2f}"
                  f"{c.over_floor:>8.2f}{c.max_abs_diff:>10.1e}{c.reference_peak_mb:>8.0f}/{c.ours_peak_mb:<6.0f}"
                  f"{c.spread.get('ours', 0):>8.2f}")
            for peer, sec in c.peers.items():
                print(f"{'  ' + peer:<22}{sec:>12.4f}  (ours / {peer}: {c.ours_s / sec:.2f})")
        for what, why in notes.items():
            print(f"note: {what}: {why}")
    return 0


def _progress(case: Case) -> None:
    """Each case's times on stderr as it finishes (also with ``--json``: a run cut short by a time
    limit still leaves what it measured)."""
    peers = "".join(f", {k} {v:.4f}s" for k, v in case.peers.items())
    print(f"  {case.name}: reference {case.reference_s:.4f}s, ours {case.ours_s:.4f}s, floor {case.floor_s:.4f}s{peers}",
          file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
