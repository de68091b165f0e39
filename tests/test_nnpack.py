"""The NNPACK convolutions of a CPU process with one torch thread (a dataset scoring lane) or
two (the app's server).

``lpips_core.backbones.run_layers`` sends the large stride-1 convolutions to NNPACK when torch
runs the thread count NNPACK's pool was made for. The test process makes a one-thread pool
(``conftest.py``); most tests here run under ``torch.set_num_threads(1)`` and check that NNPACK
really ran (its calls counted), on which layers, that every learned metric gives the reference
package's numbers (or, for ST-LPIPS and DISTS, the numbers of the oneDNN path, which their own
tests hold to the references), and that a failing NNPACK falls back to oneDNN. The two-thread
path runs in fresh processes (:func:`test_a_two_thread_process`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from lpips_core import LPIPS, backbones, winograd
from lpips_core.conventions import to_input
from lpips_core.dists import DISTS
from lpips_core.stlpips import STLPIPS
from lpips_core.testing import reference_lpips
from lpips_core.weights import load_backbone_weights

pytestmark = pytest.mark.skipif(not torch.backends.nnpack.is_available(),
                                reason="this PyTorch build has no NNPACK: the oneDNN path is the only one")


@pytest.fixture(autouse=True)
def memory_rule_batches(monkeypatch):
    """Batches by the memory rule, not measured (``lpips_core.batching``): the NNPACK calls counted
    here are the pass's own, in batches these tests know."""
    monkeypatch.setenv("LPIPS_EXPLORER_BATCH_TABLE", "off")


@pytest.fixture
def calls(monkeypatch):
    """Records the input shape of every NNPACK convolution: torch's call as the shape, a call with
    the layer's kept Winograd kernel (:mod:`lpips_core.winograd`) as ``("kept", *shape)``."""
    seen: list[tuple] = []
    real = torch._nnpack_spatial_convolution
    kept = winograd.conv3x3

    def counted(x, w, b, padding, *args):
        seen.append(tuple(x.shape))
        return real(x, w, b, padding, *args)

    def counted_kept(layer, x, **kwargs):
        seen.append(("kept", *x.shape))
        return kept(layer, x, **kwargs)

    monkeypatch.setattr(torch, "_nnpack_spatial_convolution", counted)
    monkeypatch.setattr(winograd, "conv3x3", counted_kept)
    return seen


def _photo_pair(golden, side: int, n: int = 2):
    """``n`` pairs of ``side`` px in [-1, 1]: the reference repo's example patch against its two
    distorted versions (repeated)."""
    x = to_input(golden["ex_ref"], size=(side, side))
    y = torch.cat([to_input(golden[k], size=(side, side)) for k in ("ex_p0", "ex_p1")])
    return x.repeat(n, 1, 1, 1)[:n], y.repeat(n // 2 + 1, 1, 1, 1)[:n]


@pytest.mark.parametrize("net, side, layers", [
    # AlexNet at 256 px: the 5×5 conv2 over 31 px maps in torch's call; the 3×3 conv3–5 (15 px)
    # with their kept kernels
    ("alex", 256, [(4, 64, 31, 31), ("kept", 4, 192, 15, 15), ("kept", 4, 384, 15, 15), ("kept", 4, 256, 15, 15)]),
    # VGG16 at 64 px: the 3×3 layers over 64, 32 and 16 px maps with their kept kernels; not the
    # 3-channel first one nor the 8 and 4 px ones
    ("vgg", 64, [("kept", 4, 64, 64, 64), ("kept", 4, 64, 32, 32), ("kept", 4, 128, 32, 32), ("kept", 4, 128, 16, 16),
                 ("kept", 4, 256, 16, 16), ("kept", 4, 256, 16, 16)]),
])
def test_lpips_on_one_thread_uses_nnpack_and_equals_the_reference(golden, one_thread, calls, net, side, layers):
    """Totals within 1e-6 of the reference ``lpips`` package (measured: ≤ 6e-8); NNPACK ran on
    exactly the layers of large maps, the 3×3 ones with their kept kernels."""
    model = LPIPS(net, "0.1", True, device="cpu")
    ref = reference_lpips(net, "0.1", True, load_backbone_weights(net).state_dict)
    x, y = _photo_pair(golden, side)
    got = model(x, y)
    with torch.no_grad():
        want = ref(x, y).flatten()
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6, rtol=0)
    assert calls == layers


def test_nnpack_only_for_the_pools_thread_count_and_float32_inference(golden, calls):
    """Two threads (this process's pool is for one), a gradient, float64 and the switch off all
    keep oneDNN. With a fixed target, only the target's own pass (no graph) may use NNPACK."""
    assert backbones.nnpack_pool() == 1
    model = LPIPS("alex", device="cpu")
    x, y = _photo_pair(golden, 256)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        model(x, y)
        assert calls == []
        torch.set_num_threads(1)
        model(x.clone().requires_grad_(), y.clone().requires_grad_()).sum().backward()
        assert calls == []
        model(x.clone().requires_grad_(), y).sum().backward()
        n = y.shape[0]  # the fixed target's pass, alone: conv2, then conv3–5 with their kept kernels
        assert calls == [(n, 64, 31, 31), ("kept", n, 192, 15, 15), ("kept", n, 384, 15, 15), ("kept", n, 256, 15, 15)]
        calls.clear()
        model.double()(x.double(), y.double())
        assert calls == []
        model.float()
        backbones.USE_NNPACK = False
        model(x, y)
        assert calls == []
        backbones.USE_NNPACK = True
        model(x, y)
        assert len(calls) == 4
    finally:
        backbones.USE_NNPACK = True
        torch.set_num_threads(before)


def test_a_fixed_target_uses_nnpack_except_in_dists(golden, one_thread, calls):
    """A loss's fixed target runs the fast path: NNPACK for LPIPS (gradients within 5e-8 of the
    reference's), oneDNN for DISTS, whose structure terms NNPACK's rounding moved the other side's
    gradient by up to 1.8e-6 (192 px; the bound is 1e-6; ``test_training_path.py`` holds both)."""
    x, y = _photo_pair(golden, 64)
    LPIPS("vgg", device="cpu")(x.clone().requires_grad_(), y).sum().backward()
    assert calls == [("kept", 2, 64, 64, 64), ("kept", 2, 64, 32, 32), ("kept", 2, 128, 32, 32),  # the target's
                     ("kept", 2, 128, 16, 16), ("kept", 2, 256, 16, 16), ("kept", 2, 256, 16, 16)]  # pass alone
    calls.clear()
    DISTS(device="cpu")((x.clone() + 1) / 2, (y + 1) / 2)  # inference: NNPACK
    assert calls
    calls.clear()
    DISTS(device="cpu")(((x.clone() + 1) / 2).requires_grad_(), (y + 1) / 2).sum().backward()
    assert calls == []


def test_contiguous_weight_copies_are_kept_and_renewed(golden, one_thread):
    """NNPACK needs contiguous weights; a CPU model's are channels-last. The copy (the backbone's
    contiguous stack, shared with the gradient path) is made once and made again when a parameter
    is replaced or changed in place."""
    model = LPIPS("alex", device="cpu")
    x, y = _photo_pair(golden, 256)
    first = model(x, y)

    def cached():
        return model.backbone.__dict__["_contiguous_features"][3].weight

    copy = cached()
    assert copy.is_contiguous() and torch.equal(copy, model.backbone.features[3].weight)
    model(x, y)
    assert cached() is copy
    with torch.no_grad():
        model.backbone.features[3].weight.mul_(2.0)
    doubled = model(x, y)
    assert cached() is not copy and torch.equal(cached(), model.backbone.features[3].weight)
    assert not torch.allclose(doubled, first)
    model.double().float()  # the same Parameter objects, new storage
    model(x, y)
    assert cached().data_ptr() != copy.data_ptr() and torch.equal(cached(), model.backbone.features[3].weight)


def test_a_model_built_under_inference_mode(golden, one_thread, calls):
    """Parameters made under ``torch.inference_mode`` are inference tensors, which have no version
    counter: the contiguous copy is keyed without one, and the NNPACK pass gives the numbers of a
    model built as usual (a benchmark building its models in inference mode raised here)."""
    x, y = _photo_pair(golden, 256)
    with torch.inference_mode():
        built = LPIPS("alex", device="cpu")
        assert next(built.parameters()).is_inference()
        got = built.compare(x, y).total
    assert calls
    want = LPIPS("alex", device="cpu").compare(x, y).total
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6, rtol=0)


def test_a_copy_made_by_an_inference_pass_serves_a_later_gradient(golden, one_thread):
    """The contiguous stack is shared by the NNPACK pass (inference) and the gradient path. Made
    first by an inference call, its weights must not be inference tensors: a differentiable call
    afterwards gives the gradient of a model that never ran the NNPACK pass."""
    model, fresh = LPIPS("alex", device="cpu"), LPIPS("alex", device="cpu")
    x, y = _photo_pair(golden, 64)
    model.compare(x, y)  # inference mode, one thread: the NNPACK pass makes the copy
    assert not torch.is_inference(model.backbone.__dict__["_contiguous_features"][0].weight)
    grads = []
    for m in (model, fresh):
        xg = x.clone().requires_grad_()
        m(xg, y).sum().backward()
        grads.append(xg.grad)
    assert torch.equal(grads[0], grads[1]) and grads[0].abs().sum() > 0


def test_a_failing_nnpack_falls_back_to_onednn(golden, one_thread, monkeypatch):
    """If NNPACK raises, the layer runs on oneDNN, the result is unchanged, and NNPACK is not tried
    again in this process."""
    model = LPIPS("alex", device="cpu")
    x, y = _photo_pair(golden, 256)
    monkeypatch.setattr(backbones, "USE_NNPACK", False)
    want = model(x, y)
    monkeypatch.setattr(backbones, "USE_NNPACK", True)
    tries = []

    def broken(*args):
        tries.append(1)
        raise RuntimeError("NNPACK SpatialConvolution_updateOutput failed")

    monkeypatch.setattr(torch, "_nnpack_spatial_convolution", broken)
    monkeypatch.setitem(backbones._NNPACK, "failed", False)
    np.testing.assert_allclose(model(x, y).numpy(), want.numpy(), atol=1e-6, rtol=0)
    assert tries == [1] and backbones._NNPACK["failed"]
    model(x, y)
    assert tries == [1]


@pytest.mark.parametrize("build, side", [
    (lambda: STLPIPS("alex", device="cpu"), 128),
    pytest.param(lambda: STLPIPS("vgg", device="cpu"), 64, marks=pytest.mark.slow),
    pytest.param(lambda: DISTS(device="cpu"), 64, marks=pytest.mark.slow),
])
def test_successors_on_one_thread_equal_their_onednn_numbers(golden, one_thread, calls, build, side):
    """ST-LPIPS and DISTS through NNPACK give the numbers of their oneDNN path (held to their
    reference packages by their own tests) within 1e-6."""
    model = build()
    x, y = _photo_pair(golden, side)
    if model.input_range == "[0,1]":
        x, y = (x + 1) / 2, (y + 1) / 2
    backbones.USE_NNPACK = False
    try:
        want = model(x, y)
    finally:
        backbones.USE_NNPACK = True
    got = model(x, y)
    assert calls, "NNPACK did not run"
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6, rtol=0)


@pytest.mark.parametrize("kernel, stride, shape", [
    (3, 2, (12, 192, 31, 31)),  # AlexNet's pools
    (2, 2, (1, 64, 256, 256)),  # VGG16's
    (2, 2, (2, 8, 17, 9)),      # odd sides: the last row and column dropped, as max_pool2d does
    (3, 1, (1, 4, 7, 5)),       # stride 1 (overlapping)
    (3, 2, (1, 1, 3, 3)),       # one output pixel
])
def test_separable_nchw_max_pool_equals_max_pool2d(kernel, stride, shape):
    """The NNPACK path's max-pool over strided views gives exactly ``nn.MaxPool2d``'s values."""
    layer = torch.nn.MaxPool2d(kernel, stride)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    got = backbones._max_pool_nchw(x, layer)
    assert torch.equal(got, layer(x))
    assert backbones._max_pool_nchw(x, torch.nn.MaxPool2d(kernel, stride, padding=1)) is None
    assert backbones._max_pool_nchw(x, torch.nn.MaxPool2d(kernel, stride, ceil_mode=True)) is None


def test_lanes_forked_after_this_process_used_nnpack_give_its_rows(tmp_path, one_thread, calls):
    """A process that used NNPACK on one thread can still fork scoring lanes (its NNPACK pool, made
    for one thread, has no threads to lose in the fork): VGG16 rows in two lanes equal the rows
    scored here (±1e-6), and NNPACK ran here (the lanes' calls are not visible here)."""
    from datasets_shared import make_pairs
    from lpips_core.datasets import Scorer, match_folders, score_pairs

    pairs = match_folders(*make_pairs(tmp_path, n=4, odd_size=0))
    sc = Scorer(["lpips-vgg"], device="cpu")
    here = score_pairs(pairs, scorer=sc, batch_size=2, lanes=0, workers=0)
    assert calls, "NNPACK did not run in this process"
    lanes = score_pairs(pairs, scorer=sc, batch_size=2, lanes=2)
    name = sc.names[0]
    assert [r[name] for r in lanes.rows] == pytest.approx([r[name] for r in here.rows], abs=1e-6)


#: Library modules whose contracts hold on both kernel paths. The fast tier runs them on one
#: thread (NNPACK); ``--full``, the tier CI runs, keeps torch's default threads (oneDNN) for
#: everything else, so it runs these again on one thread here.
ONE_THREAD_MODULES = ("test_contract.py", "test_model.py", "test_gradients.py", "test_stlpips.py", "test_dists.py",
                      "test_datasets_score.py")


@pytest.mark.slow
def test_the_library_contracts_also_hold_on_one_thread():
    """A bug of the one-thread path alone (an inference pass's contiguous stack that a later
    gradient could not use) passed the full tier, which never ran that path; the fast tier caught
    it. The full tier now runs these modules' fast tests in a one-thread process (~35 s)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          *(str(tests / m) for m in ONE_THREAD_MODULES)],
                         cwd=tests.parent, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1] and "failed" not in run.stdout.splitlines()[-1]


#: Run in a fresh process with two torch threads: NNPACK's first call there makes a two-thread pool.
TWO_THREADS = r"""
import json, sys
import numpy as np, torch
from PIL import Image
torch.set_num_threads(2)
from lpips_core import LPIPS, backbones, winograd
from lpips_core.conventions import to_input
from lpips_core.testing import reference_lpips
from lpips_core.weights import load_backbone_weights

seen = []
real = torch._nnpack_spatial_convolution
def counted(x, *args):
    seen.append(list(x.shape))
    return real(x, *args)
torch._nnpack_spatial_convolution = counted

golden = {k: np.asarray(Image.open(f"{sys.argv[1]}/{k}.png").convert("RGB"), dtype=np.float32) / 255
          for k in ("ex_ref", "ex_p0", "ex_p1")}
x = to_input(golden["ex_ref"], size=(64, 64)).repeat(2, 1, 1, 1)
y = torch.cat([to_input(golden[k], size=(64, 64)) for k in ("ex_p0", "ex_p1")])
model = LPIPS("vgg", "0.1", True, device="cpu")
ref = reference_lpips("vgg", "0.1", True, load_backbone_weights("vgg").state_dict)
with torch.no_grad():
    want = ref(x, y).flatten()
got = model(x, y)
out = {"gap": float((got - want).abs().max()), "pool": backbones.nnpack_pool(), "calls": list(seen),
       "cpu": torch.backends.cpu.get_cpu_capability()}
seen.clear()
torch.set_num_threads(1)
one = model(x, y)
out["one_thread_calls"], out["one_thread_gap"] = len(seen), float((one - want).abs().max())
if sys.argv[2] == "lanes":
    torch.set_num_threads(2)
    sys.path.insert(0, sys.argv[3])
    from pathlib import Path
    from datasets_shared import make_pairs
    from lpips_core.datasets import Scorer, match_folders, score_pairs
    pairs = match_folders(*make_pairs(Path(sys.argv[4]), n=4, odd_size=0))
    sc = Scorer(["lpips-vgg"], device="cpu")
    here = score_pairs(pairs, scorer=sc, batch_size=2, lanes=0, workers=0)
    lanes = score_pairs(pairs, scorer=sc, batch_size=2, lanes=2)
    name = sc.names[0]
    out["lane_gap"] = max(abs(a[name] - b[name]) for a, b in zip(here.rows, lanes.rows))
print(json.dumps(out))
"""


def _two_threads(*args: str) -> dict:
    import json
    import subprocess
    import sys
    from pathlib import Path

    from conftest import golden_dir

    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    run = subprocess.run([sys.executable, "-c", TWO_THREADS, str(golden_dir()), *args],
                         cwd=Path(__file__).resolve().parents[1], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1])


def test_a_two_thread_process():
    """The app's server runs two torch threads. On an AVX2 CPU, NNPACK's first call there makes a
    two-thread pool, every NNPACK convolution takes one image at a time (its batched algorithm is
    the slower one on two threads), VGG16's totals stay within 1e-6 of the reference package's,
    and a later one-thread call in the same process keeps oneDNN (the pool is not for it). On
    other CPUs (AVX-512: oneDNN is faster there) two threads never call NNPACK."""
    out = _two_threads("plain")
    assert out["gap"] <= 1e-6 and out["one_thread_gap"] <= 1e-6
    if out["cpu"] not in backbones.NNPACK_MULTI_THREAD_CPUS:
        assert out["pool"] is None and out["calls"] == []
        return
    assert out["pool"] == 2
    # VGG16 at 64 px: the 64 and 32 px layers past the first, for each of the 4 images (x, y)
    assert out["calls"] == [[1, 64, 64, 64], [1, 64, 64, 64], [1, 64, 64, 64], [1, 64, 64, 64],
                            [1, 64, 32, 32], [1, 64, 32, 32], [1, 64, 32, 32], [1, 64, 32, 32],
                            [1, 128, 32, 32], [1, 128, 32, 32], [1, 128, 32, 32], [1, 128, 32, 32]]
    assert out["one_thread_calls"] == 0


@pytest.mark.slow
def test_lanes_forked_from_a_two_thread_process_keep_onednn(tmp_path):
    """Scoring lanes forked after the process made a two-thread NNPACK pool (whose worker threads
    the fork does not copy) must not call NNPACK, or they would wait for those threads forever:
    they finish, and their VGG16 rows equal the rows scored in the process (±1e-6). (On a CPU
    where two threads keep oneDNN there is no such pool and the lanes make their own.)"""
    out = _two_threads("lanes", str(Path(__file__).resolve().parent), str(tmp_path))
    assert out["pool"] == (2 if out["cpu"] in backbones.NNPACK_MULTI_THREAD_CPUS else None)
    assert out["lane_gap"] <= 1e-6


#: Run in a fresh process with two torch threads (the app's server): scoring lanes as threads.
THREAD_LANES = r"""
import json, sys, threading
from pathlib import Path
import torch
torch.set_num_threads(2)
sys.path.insert(0, sys.argv[1])
from datasets_shared import make_pairs
from lpips_core import backbones
from lpips_core.datasets import Scorer, match_folders, score_pairs
pairs = match_folders(*make_pairs(Path(sys.argv[2]), n=4, odd_size=0))
sc = Scorer(["lpips-alex", "lpips-vgg"], device="cpu")
here = score_pairs(pairs, scorer=sc, batch_size=1, lanes=0, workers=0)
out = {"cpu": torch.backends.cpu.get_cpu_capability(), "pool_before": backbones.nnpack_pool()}
lanes = score_pairs(pairs, scorer=sc, batch_size=1, lanes=2, workers=0, lane_kind="thread")
later = {}
t = threading.Thread(target=lambda: later.update(n=torch.get_num_threads()))
t.start()
t.join()
out.update(pool_after=backbones.nnpack_pool(), threads_here=torch.get_num_threads(), threads_later=later["n"],
           gap=max(abs(a[n] - b[n]) for a, b in zip(here.rows, lanes.rows) for n in sc.names))
print(json.dumps(out))
"""


def test_lane_threads_in_a_two_thread_process(tmp_path):
    """The app's server (two torch threads) scores in lanes that are its own threads: they make no
    NNPACK pool (it would be a one-thread pool for the whole process; an AVX2 server's own
    two-thread pool stays), the caller and threads started afterwards keep two torch threads, and
    the AlexNet and VGG16 rows equal those scored on the server's two threads (±1e-6)."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    run = subprocess.run([sys.executable, "-c", THREAD_LANES, str(Path(__file__).resolve().parent), str(tmp_path)],
                         cwd=Path(__file__).resolve().parents[1], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.splitlines()[-1])
    assert out["pool_before"] == (2 if out["cpu"] in backbones.NNPACK_MULTI_THREAD_CPUS else None)
    assert out["pool_after"] == out["pool_before"]
    assert out["threads_here"] == out["threads_later"] == 2
    assert out["gap"] <= 1e-6
