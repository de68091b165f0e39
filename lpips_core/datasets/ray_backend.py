"""The scorer on Ray Data, for more machines than one (optional: ``pip install -e .[ray]``).

``ray.data.from_items(blocks).map_batches(RayScorer, concurrency=N, ...)``: each of ``N`` actors
builds the models once (:class:`RayScorer`'s constructor) and scores whole blocks, decoding
them itself. Items are the scorer's blocks (consecutive pairs in key order, see
:mod:`lpips_core.datasets.score`) rather than single pairs, so every pair goes through the
networks in the same batch as in a single-process run, and :func:`score_ray` plans, writes,
resumes and finishes a table exactly as :func:`~lpips_core.datasets.score.score_pairs` does:
the same rows, table and manifest (its ``run`` says ``"backend": "ray"``), a table begun on one
backend resumable on the other. An actor runs one torch thread per CPU it is given (one by
default, as a scoring lane does), so the tables agree to the bit with a run in lanes.

:func:`ray_cluster` connects for the length of a ``with`` block: to the cluster at an address
(``auto``, ``HOST:PORT``, ``ray://HOST:PORT``), or by default ``ray.init()``'s own choice (the
cluster ``ray start`` left on this machine, else a new local one). Every path an actor reads must
be readable on its node (a shared file system on a cluster).

Example:
    >>> with ray_cluster("head-node:6379"):                                        # doctest: +SKIP
    ...     res = score_ray(match_folders("gt", "out"), "lpips,ssim", out="rows.csv")
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
from typing import Callable, Iterator, Sequence

import numpy as np
import torch

from .loader import _decode_block
from .pairs import Discovery, Pair
from .score import ScoreResult, Scorer, _finish, _open_table, _plan
from ..spec import MetricSpec

__all__ = ["RayScorer", "actor_errors", "actor_resources", "quiet_init", "ray_cluster", "ray_module", "score_ray"]

PROBE_SECONDS = 5.0
"""How long :func:`ray_cluster` waits for a TCP connection to an address before refusing it
(``ray.init`` itself retries an address where nothing listens for many minutes)."""


def ray_module():
    """The ``ray`` module.

    Raises:
        ImportError: Ray is not installed (the message says how to install it).
    """
    try:
        import ray
        import ray.data  # noqa: F401 - the [data] extra
    except ImportError as exc:
        raise ImportError(f"the Ray backend needs Ray Data: pip install -e .[ray] ({exc})") from None
    return ray


def _host_port(address: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``ray://HOST:PORT`` → ``(host, port)``.

    Raises:
        ValueError: another form (the message lists the accepted ones).
    """
    rest = address.split("://", 1)[1] if address.startswith("ray://") else address
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"a Ray address is auto, HOST:PORT or ray://HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


def _probe(address: str) -> None:
    """Refuse ``address`` unless something accepts a TCP connection there within :data:`PROBE_SECONDS`.

    Raises:
        ValueError: a malformed address, or nothing listening (one line, naming the address).
    """
    host, port = _host_port(address)
    try:
        with socket.create_connection((host, port), timeout=PROBE_SECONDS):
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ValueError(f"no Ray cluster at {address} ({why}): start one there with `ray start --head "
                         f"--port={port}`, or leave out --address to start a local one") from None


def _target(ray, address: str | None) -> str | None:
    """The address ``ray.init(address)`` will join (``None``: it starts a new local cluster)."""
    if address not in (None, "auto"):
        return address
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # pragma: no cover - another Ray layout: no probe, ray.init decides
        return None
    try:
        return canonicalize_bootstrap_address(address)
    except (ConnectionError, ValueError) as exc:
        raise ValueError(f"no Ray cluster found for --address auto ({' '.join(str(exc).split())[:160]}): "
                         "start one with `ray start --head`, or leave out --address") from None


@contextlib.contextmanager
def ray_cluster(address: str | None = None) -> Iterator[object]:
    """Connected to a Ray cluster for the ``with`` block (yields the ``ray`` module); disconnected
    after (a local cluster started here stops). Inside an existing session, that session is used
    and left as it is.

    Args:
        address: ``None``: what ``ray.init()`` picks (``$RAY_ADDRESS``, the cluster ``ray start``
            left on this machine, else a new local one with every CPU); ``"auto"``: an existing
            cluster only; ``"HOST:PORT"`` (the head's GCS port) or ``"ray://HOST:PORT"`` (Ray Client).

    Raises:
        ImportError: Ray is not installed. ValueError: nothing listens at the address, no
            cluster for ``auto``, or ``ray.init`` refused (its first line).
    """
    ray = ray_module()
    if ray.is_initialized():
        yield ray
        return
    target = _target(ray, address)
    if target is not None:
        _probe(target)
    try:
        quiet_init(ray, address)
    except Exception as exc:  # noqa: BLE001 - Ray raises many types; each ends as one line
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise ValueError(f"cannot {'join the Ray cluster at ' + address if address else 'start or join Ray'}: "
                         f"{first[:200]}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def quiet_init(ray, address: str | None = None) -> None:
    """``ray.init(address)`` without the dashboard, and with Ray's own console output kept to
    failures: the workers' output stays in the session's log files, Ray Data's progress bars and
    notes are off (a command draws its own bar).
    Every log still goes to the session folder."""
    ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    for handler in logging.getLogger("ray.data").handlers:  # the console's; its log file keeps everything
        if type(handler).__name__ != "SessionFileHandler":
            handler.setLevel(logging.ERROR)


@contextlib.contextmanager
def actor_errors(ray) -> Iterator[None]:
    """A Ray failure inside the block (an actor's exception, a lost node, a dead actor) as one
    ``ValueError`` line: the original exception's type and first line where Ray keeps it.

    Raises:
        ValueError: the failure, in one line.
    """
    try:
        yield
    except ray.exceptions.RayError as exc:
        cause = getattr(exc, "cause", None) or exc
        text = next((ln.strip() for ln in str(cause).splitlines() if ln.strip()), "")
        raise ValueError(f"a Ray actor failed: {type(cause).__name__}" + (f": {text[:300]}" if text else "")) from None


def actor_resources(ray, device: str | None, actors: int | None, work: int) -> tuple[int, float, float]:
    """``(actors, num_cpus, num_gpus)`` per actor: one CPU each on a CPU device, one GPU each on a
    CUDA device; ``actors`` by default one per CPU (GPU) of the cluster, at most ``work`` (the
    items to process) and at least 1."""
    gpu = str(device or "cpu").startswith("cuda")
    if actors is None:
        have = ray.cluster_resources().get("GPU" if gpu else "CPU", 1)
        actors = int(have)
    return max(1, min(int(actors), int(work))), 0.0 if gpu else 1.0, 1.0 if gpu else 0.0


class RayScorer:
    """A Ray actor's callable: holds a :class:`~lpips_core.datasets.score.Scorer` (its models) and
    turns a batch of blocks (``{"pairs": JSON lists of [index, key, reference, test,
    reference_name, test_name]}``) into ``{"rows": JSON lists of rows}``, each block decoded and
    scored as a scoring lane does it (:meth:`~lpips_core.datasets.loader.PairDataset.decode_here`,
    then :meth:`~lpips_core.datasets.score.Scorer.score_block`) on ``threads`` torch threads."""

    def __init__(self, metrics: Sequence[str], mismatch: str = "error", device: str | None = "cpu",
                 max_side: int | None = None, max_pixels: int | None = None, threads: int = 1):
        from ..images import DEFAULT_MAX_PIXELS

        torch.set_num_threads(max(1, int(threads)))
        self.scorer = Scorer(list(metrics), device=device)
        self.scorer.build_all()
        self.mismatch, self.max_side = mismatch, max_side
        self.max_pixels = DEFAULT_MAX_PIXELS if max_pixels is None else max_pixels

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = []
        for text in batch["pairs"]:
            pairs = {i: Pair(*rest) for i, *rest in json.loads(str(text))}
            items = _decode_block(pairs, list(pairs), self.mismatch, self.scorer.classic, self.max_side,
                                  self.max_pixels, shared=False).unpack()
            out.append(json.dumps(self.scorer.score_block(items)))
        return {"rows": np.array(out, dtype=object)}


def score_ray(
    pairs: Discovery | Sequence[Pair],
    metrics: Sequence[MetricSpec | str] | str = ("lpips",),
    *,
    mismatch: str = "error", out: str | None = None, resume: bool = False,
    shard: tuple[int, int] | None = None, batch_size: int | None = None, concurrency: int | None = None,
    device: str | None = "cpu", max_side: int | None = None, max_pixels: int | None = None,
    force: bool = False, progress: Callable[[int, int], None] | None = None,
) -> ScoreResult:
    """:func:`~lpips_core.datasets.score.score_pairs` on Ray Data with ``concurrency`` model-holding
    actors (in the session :func:`ray_cluster` opened, else a local one ``ray.init()`` starts).

    Args:
        pairs, metrics, mismatch, out, resume, shard, batch_size, max_side, max_pixels, force,
            progress: as ``score_pairs`` (the same plan, table, manifest and resume checks).
        concurrency: actors (each builds the models once); default one per CPU of the cluster (one
            per GPU with ``device="cuda"``), at most one per block to score.
        device: where each actor runs the networks (``"cuda"``: one GPU per actor).

    Raises:
        ImportError: Ray is not installed (``pip install -e .[ray]``). ValueError: as ``score_pairs``.
    """
    ray = ray_module()
    plan = _plan(pairs, metrics, scorer=None, device=device, out=out, resume=resume, mismatch=mismatch,
                 batch_size=batch_size, shard=shard, max_side=max_side, max_pixels=max_pixels)
    if not ray.is_initialized():
        quiet_init(ray)
    n, cpus, gpus = actor_resources(ray, str(plan.scorer.device), concurrency, max(1, len(plan.mine)))
    plan.run.update(backend="ray", actors=n)
    done, writer = _open_table(plan, out, force) if out is not None else (set(), None)
    computed: list[dict] = []
    try:
        with actor_errors(ray):
            for rows in _ray_blocks(ray, plan, done, n, cpus, gpus, progress):
                if writer is not None:
                    writer.write(rows)
                else:
                    computed.extend(rows)
    finally:
        if writer is not None:
            writer.close()
    res = _finish(plan, out, computed)
    res.config["concurrency"] = n
    return res


def _ray_blocks(ray, plan, done: set[int], actors: int, cpus: float, gpus: float,
                progress: Callable[[int, int], None] | None) -> Iterator[list[dict]]:
    """The rows of each block of the plan with a pair not in ``done``, as Ray's actors finish them
    (in any order: the table is put in order when it is finished); ``progress(pairs done, pairs)``."""
    todo = [list(b) for b in plan.mine if not all(i in done for i in b)]
    total = len(plan.my_indices)
    finished = total - sum(len(b) for b in todo)
    if progress:
        progress(finished, total)
    if not todo:
        return
    pairs = plan.pairs
    items = [{"pairs": json.dumps([[i, pairs[i].key, pairs[i].reference, pairs[i].test, pairs[i].reference_name,
                                    pairs[i].test_name] for i in block])} for block in todo]
    scorer = plan.scorer
    ds = ray.data.from_items(items, override_num_blocks=min(len(items), 16 * actors)).map_batches(
        RayScorer, fn_constructor_kwargs=dict(metrics=list(scorer.names), mismatch=plan.mismatch,
                                              device=str(scorer.device), max_side=plan.max_side,
                                              max_pixels=plan.max_pixels, threads=max(1, int(cpus))),
        batch_size=1, compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=cpus, num_gpus=gpus,
        batch_format="numpy")
    for rec in ds.iter_rows():
        rows = json.loads(str(rec["rows"]))
        finished += len(rows)
        yield rows
        if progress:
            progress(finished, total)
