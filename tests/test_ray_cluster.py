"""``--backend ray`` from the command line, on a real cluster of separate processes.

The slow test starts a head (``ray start --head``) and one worker node (``ray start --address``),
each a process with one CPU in a session of its own under a short temporary ``--temp-dir``
(Ray's socket paths are length-limited), token authentication on as ``ray start`` has it, and
runs ``score``, ``embed`` (the embedding, and a pool index with ``--proj-dim``), ``neighbours`` and
``diversity`` through the CLI with ``--backend ray --address HOST:PORT`` against it, each compared
with the local run: ``score``'s table byte for byte (40 pairs with awkward names, and a table begun
locally resumed on Ray), the embedding within 1e-7, the pool index's projections within 1e-5 (and
the same answers from it), the neighbours and the diversity within 1e-6. The cluster is torn down whatever
happens: SIGTERM to the two ``ray start`` processes, then SIGKILL to every process left in their
two sessions (Ray's workers make process groups of their own, not sessions). ``ray stop`` is
not used: it stops every Ray process on the machine, not only this cluster's.

The fast tests need no cluster: a Ray failure (nothing at the address, Ray missing, an address
without ``--backend ray``) is one ``error:`` line and exit status 2.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from datasets_shared import distort, image, save
from lpips_core.__main__ import main

NAMES = ["plain", "with space", "comma,semicolon;", 'quote"double', "quote'single", "#hash", "-leading-dash",
         "=formula", "café ünïcode", "日本語", "emoji 😀", "tab\there", "new\nline", "cr\rreturn", "back\\slash",
         "percent %d", "brace {x}", "dollar $HOME", "star *", "question ?", "bracket [a]", "amp & and", "pipe |",
         "lt <b>", "nel\x85", "ls\u2028ps", "bad\udcff", "del\x7f", "esc\x1b[31m", "dots...", "trailing space ",
         "UPPER", "lower", "MiXeD", "a" * 120, "0000", "1e5", "nan", "inf", "-0"]
"""40 pair names a file system takes and a table, a JSON line or a terminal must not mangle."""


def _awkward_pairs(root: Path) -> tuple[Path, Path]:
    """``root/a`` and ``root/b``: 40 pairs of 64 px images named :data:`NAMES` (b as JPEG every third)."""
    rng = np.random.default_rng(43)
    a_dir, b_dir = root / "a", root / "b"
    for i, name in enumerate(NAMES):
        a = image(rng)
        save(a, a_dir / f"{name}.png")
        save(distort(rng, a, 3 + i), b_dir / f"{name}.{'jpg' if i % 3 == 0 else 'png'}")
    return a_dir, b_dir


def _run(*args) -> tuple[int, str, str]:
    """``python -m lpips_core ARGS`` in this process: exit status, stdout, stderr."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


# --------------------------------------------------------------------------- failures, no cluster
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_cluster_at_the_address_is_one_line(tmp_path):
    a, b = _awkward_pairs(tmp_path)
    port = _free_port()
    code, out, err = _run("score", a, b, "--backend", "ray", "--address", f"127.0.0.1:{port}")
    assert code == 2 and out == ""
    assert err.startswith(f"error: no Ray cluster at 127.0.0.1:{port}") and err.count("\n") == 1


@pytest.mark.parametrize("command", [["score", "A", "B"], ["embed", "A", "OUT"], ["neighbours", "A", "A"],
                                     ["diversity", "A"]])
def test_address_without_the_ray_backend_is_refused(tmp_path, command):
    a, b = _awkward_pairs(tmp_path)
    args = [{"A": a, "B": b, "OUT": tmp_path / "out"}.get(x, x) for x in command]
    code, _, err = _run(*args, "--address", "127.0.0.1:1")
    assert code == 2 and err == "error: --address and --actors need --backend ray\n"


@pytest.mark.parametrize("address, why", [("nohost", "expected auto, HOST:PORT"), ("h:99999", "expected auto")])
def test_a_malformed_address_is_a_usage_error(address, why):
    code, _, err = _run("score", "A", "B", "--backend", "ray", "--address", address)
    assert code == 2 and why in err and err.count("\n") == 1


def test_ray_not_installed_is_one_line(tmp_path, monkeypatch):
    a, b = _awkward_pairs(tmp_path)
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    code, _, err = _run("embed", a, tmp_path / "emb", "--backend", "ray")
    assert code == 2 and err.startswith("error: the Ray backend needs Ray Data: pip install -e .[ray]")
    assert err.count("\n") == 1


def test_the_ray_shard_count_is_fixed_by_the_shards_already_there():
    from lpips_core.space.ray import SHARD_IMAGES, ray_shards

    assert ray_shards(40, 2, {}) == 4 and ray_shards(3, 8, {}) == 3  # two shards an actor, one image at least
    assert ray_shards(10 * SHARD_IMAGES, 2, {}) == 10  # at most SHARD_IMAGES images a shard
    assert ray_shards(40, 16, {0: 5, 3: 5}) == 5  # a rerun keeps the split of the shards it finds
    with pytest.raises(ValueError, match="mixes shard counts"):
        ray_shards(40, 2, {0: 5, 1: 4})


# --------------------------------------------------------------------------- a real cluster
def _sessions_processes(sids: set[int]) -> list[int]:
    """The processes whose session is one of ``sids`` (read from ``/proc``)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) in sids:  # after the name: state, ppid, pgrp, session
                pids.append(int(d.name))
    return pids


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM to each ``ray start`` process's group, then SIGKILL to what is left of their sessions."""
    sids = {p.pid for p in procs}
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _sessions_processes(sids):
        time.sleep(0.5)
    for pid in _sessions_processes(sids):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in procs:
        p.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _sessions_processes(sids):  # the killed ones, until reaped
        time.sleep(0.2)


def _wait_for_nodes(address: str, env: dict, nodes: int, timeout: float = 120) -> None:
    probe = (f"import ray; ray.init(address={address!r}, log_to_driver=False); "
             "print(sum(n['Alive'] for n in ray.nodes()))")
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=90)
        last = r.stdout.strip() or r.stderr.strip()[-300:]
        if r.stdout.strip() == str(nodes):
            return
        time.sleep(1)
    raise RuntimeError(f"the Ray cluster at {address} did not get {nodes} nodes: {last}")


@pytest.fixture(scope="module")
def cluster():
    """A head and one worker node, one CPU each, as separate processes: ``(address, env)``; torn down after."""
    ray_bin = Path(sys.executable).with_name("ray")
    if not ray_bin.exists():
        pytest.skip("the ray command is not installed (pip install -e .[ray])")
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths are length-limited
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16))
    common = ["--num-cpus=1", "--block", "--disable-usage-stats"]
    procs: list[subprocess.Popen] = []
    try:
        for args, log in ((["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}"], "head"),
                          ([f"--address=127.0.0.1:{port}"], "worker")):
            procs.append(subprocess.Popen([str(ray_bin), "start", *args, *common], env=env, start_new_session=True,
                                          stdout=open(Path(temp) / f"{log}.log", "w"), stderr=subprocess.STDOUT))
            if log == "head":
                _wait_for_nodes(f"127.0.0.1:{port}", env, 1)
        _wait_for_nodes(f"127.0.0.1:{port}", env, 2)
        yield f"127.0.0.1:{port}", env
    finally:
        _stop(procs)
        shutil.rmtree(temp, ignore_errors=True)


def _cli(env: dict, cwd: Path, *args, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "lpips_core", *map(str, args)], capture_output=True, env=env, cwd=cwd,
                       timeout=600)
    if check:
        assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    return r


@pytest.mark.slow
def test_every_command_on_a_real_cluster_equals_the_local_run(cluster, tmp_path):
    address, env = cluster
    a, b = _awkward_pairs(tmp_path)
    ray = ["--backend", "ray", "--address", address]

    # score: the same table and manifest, byte for byte; blocks of 16 pairs: 3 blocks over 2 nodes
    _cli(env, tmp_path, "score", a, b, "--out", tmp_path / "local.csv", "--lanes", "2", "--json")
    r = json.loads(_cli(env, tmp_path, "score", a, b, "--out", tmp_path / "ray.csv", "--json", *ray).stdout)
    assert r["n"] == 40 and r["config"]["backend"] == "ray" and r["config"]["actors"] == 2
    assert (tmp_path / "ray.csv").read_bytes() == (tmp_path / "local.csv").read_bytes()
    ml, mr = (json.loads(Path(f"{tmp_path / f}.manifest.json").read_text()) for f in ("local.csv", "ray.csv"))
    assert {k: v for k, v in mr["run"].items() if k not in ("backend", "actors")} == ml["run"]
    assert {k: v for k, v in mr.items() if k != "run"} == {k: v for k, v in ml.items() if k != "run"}

    # a table begun locally (its last 20 rows lost) resumed on Ray: the uninterrupted table
    _cli(env, tmp_path, "score", a, b, "--out", tmp_path / "l.jsonl", "--lanes", "2", "--json")
    whole = (tmp_path / "l.jsonl").read_bytes()
    lines = whole.split(b"\n")
    (tmp_path / "cut.jsonl").write_bytes(b"\n".join(lines[:20]) + b"\n")
    shutil.copy(f"{tmp_path / 'l.jsonl'}.manifest.json", f"{tmp_path / 'cut.jsonl'}.manifest.json")
    _cli(env, tmp_path, "score", a, b, "--out", tmp_path / "cut.jsonl", "--resume", "--json", *ray)
    assert (tmp_path / "cut.jsonl").read_bytes() == whole

    # embed: every shard's manifest as `embed --shard i/n` writes it, the rows within 1e-7
    r = json.loads(_cli(env, tmp_path, "embed", a, tmp_path / "emb", "--json", *ray).stdout)
    n = r["shards"]
    assert r["count"] == 40 and r["backend"] == "ray" and n >= 2
    for i in range(n):
        _cli(env, tmp_path, "embed", a, tmp_path / "emb-local", "--shard", f"{i}/{n}", "--json")
    _same_embedding(tmp_path / "emb", tmp_path / "emb-local", n)
    for f in (tmp_path / "emb").glob(f"*-00001-of-{n:05d}.*"):  # a run that stopped before shard 1
        f.unlink()
    r = json.loads(_cli(env, tmp_path, "embed", a, tmp_path / "emb", "--json", *ray).stdout)
    assert r["shards"] == n and r["count"] == 40
    _same_embedding(tmp_path / "emb", tmp_path / "emb-local", n)

    # neighbours and diversity: their embedding stage on Ray, the answers of the local run
    nl = json.loads(_cli(env, tmp_path, "neighbours", a, b, "--k", "3", "--json").stdout)
    nr = json.loads(_cli(env, tmp_path, "neighbours", a, b, "--k", "3", "--json", *ray).stdout)
    assert [q["query"] for q in nr["queries"]] == [q["query"] for q in nl["queries"]]
    for qr, ql in zip(nr["queries"], nl["queries"]):
        assert [x["name"] for x in qr["neighbours"]] == [x["name"] for x in ql["neighbours"]]
        assert np.allclose([x["distance"] for x in qr["neighbours"]], [x["distance"] for x in ql["neighbours"]],
                           rtol=0, atol=1e-6)
    # a pool index built on Ray: the local build's files (projections within 1e-5), the same answers
    _cli(env, tmp_path, "embed", a, tmp_path / "idx-local", "--proj-dim", "16")
    r = json.loads(_cli(env, tmp_path, "embed", a, tmp_path / "idx-ray", "--proj-dim", "16", "--json", *ray).stdout)
    assert r["names"] == 40 and r["projection"]["method"] == "pca"
    _same_pool(tmp_path / "idx-ray", tmp_path / "idx-local")
    il = json.loads(_cli(env, tmp_path, "neighbours", b, "--index", tmp_path / "idx-local", "--json").stdout)
    ir = json.loads(_cli(env, tmp_path, "neighbours", b, "--index", tmp_path / "idx-ray", "--json").stdout)
    assert ir["queries"] == il["queries"]

    dl = json.loads(_cli(env, tmp_path, "diversity", a, "--json").stdout)
    dr = json.loads(_cli(env, tmp_path, "diversity", a, "--json", *ray).stdout)
    for name, s in dl["metrics"].items():
        assert dr["metrics"][name]["n"] == s["n"] == 780
        assert abs(dr["metrics"][name]["mean"] - s["mean"]) <= 1e-6


def _same_embedding(ray_dir: Path, local_dir: Path, shards: int) -> None:
    """The two folders hold one embedding: equal manifests but for the array files' digests (the
    rows come from other kernels: an actor runs one torch thread), rows within 1e-7."""
    from lpips_core import space

    for i in range(shards):
        tag = f"{i:05d}-of-{shards:05d}"
        mr, ml = (json.loads((d / f"embedding-{tag}.json").read_text()) for d in (ray_dir, local_dir))
        for m in (mr, ml):
            m["phi"].pop("sha256"), m["norms"].pop("sha256")
        assert mr == ml
    er, el = space.open_embedding(ray_dir), space.open_embedding(local_dir)
    assert er.names == el.names and er.content == el.content
    assert np.abs(er.rows(0, len(er)) - el.rows(0, len(el))).max() <= 1e-7


def _same_pool(ray_dir: Path, local_dir: Path) -> None:
    """Two pool indexes of one folder: equal manifests but for the digests of the projections and
    the index (computed on other kernels), equal names and file digests, projections within 1e-5."""
    from lpips_core import space

    mr, ml = (json.loads((d / "pool.json").read_text()) for d in (ray_dir, local_dir))
    for m in (mr, ml):
        m["arrays"]["proj"].pop("sha256"), m["arrays"]["index"].pop("sha256")
    assert mr == ml
    pr, pl = space.open_pool(ray_dir), space.open_pool(local_dir)
    assert pr.names == pl.names and (pr.digests == pl.digests).all()
    assert np.abs(np.load(ray_dir / "proj.npy") - np.load(local_dir / "proj.npy")).max() <= 1e-5
