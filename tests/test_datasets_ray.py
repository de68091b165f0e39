"""The Ray Data backend on a local Ray with 2 workers gives the single-process table."""

from __future__ import annotations

import pytest

from datasets_shared import make_pairs
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
    assert res.rows == single.rows  # same blocks, same batches: equal to the bit
    assert res.summary == single.summary
    assert res.config["backend"] == "ray" and res.config["concurrency"] == 2
