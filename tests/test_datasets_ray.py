"""The Ray Data backend on a local Ray with 2 workers gives the single-process table."""

from __future__ import annotations

import pytest
import torch

from datasets_shared import assert_same_rows, make_pairs
from lpips_core.datasets import Scorer, match_folders, score_pairs


@pytest.mark.slow
def test_ray_with_two_actors_equals_one_process(tmp_path):
    import ray  # the [ray] extra, part of the test extras

    from lpips_core.datasets.ray_backend import score_ray

    disc = match_folders(*make_pairs(tmp_path, n=6, seed=3))
    specs = ["lpips", "lpips-alex-baseline", "psnr"]
    single = score_pairs(disc, scorer=Scorer(specs, device="cpu"), batch_size=2, workers=0)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        res = score_ray(disc, specs, batch_size=2, concurrency=2, device="cpu")
    finally:
        ray.shutdown()
    # the same blocks and batches; the actors run one torch thread (NNPACK for the large
    # convolutions), this process may run two (oneDNN): equal within 1e-6, and to the bit when the
    # kernels are the same (one thread here too, as in the fast tier)
    names = list(Scorer(specs, device="cpu").names)
    assert_same_rows(res.rows, single.rows, names)
    if torch.get_num_threads() == 1:
        assert res.rows == single.rows
    assert res.summary["n"] == single.summary["n"] and res.summary["skipped"] == single.summary["skipped"]
    for name in names:
        assert res.summary["metrics"][name]["mean"] == pytest.approx(single.summary["metrics"][name]["mean"], abs=1e-6)
    assert res.config["backend"] == "ray" and res.config["concurrency"] == 2
