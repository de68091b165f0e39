"""Calibration lab: what LPIPS's learned "lin" weights do, shown on random features.

A fixed, randomly initialised five-layer convolutional network (the *stand-in*) replaces the
pretrained backbone, so everything here runs without downloading weights. On its features the
engine's Eq. 1 code (:func:`lpips_core.model.unit_normalize`, :func:`lpips_core.model.layer_term_maps`)
gives distances, and two experiments show what the channel weights are for:

* :func:`mechanics` — one synthetic 64 × 64 patch: the cosine identity behind the unweighted
  distance, a spatial map that finds noise added to one quadrant, and a table of distances for
  four distortions under the ``[-1, 1]`` and ``[0, 1]`` input conventions and after a 2×
  bilinear upsampling.
* :func:`run_2afc` — a toy two-alternative forced-choice test whose answers are fixed by
  construction: the one-pixel shift of a patch is always the "closer" patch; the other one
  carries Gaussian noise or block-DCT artifacts whose MSE is 0.5 to 2 times the shift's. Plain
  L2, each stand-in with all channel weights 1, and each stand-in with non-negative channel
  weights fitted to training triplets (a logistic link on ``d0 − d1``, Adam, projection onto
  ``w ≥ 0`` after every step) are scored on held-out triplets; ties count 0.5.
  :func:`score_lpips_2afc` / :func:`real_lpips_2afc` score the same test triplets with the real
  AlexNet / VGG16 LPIPS (baseline and lin), models the caller built (the CLI) or cached (the app).

With the default seeds and sizes the numbers are those of the worked example in the reference
article on LPIPS (section "Example"); the random streams are consumed in the same order:

* mechanics: one ``numpy.random.default_rng(0)`` stream gives the patch, then the noise for the
  cosine check (σ = 0.1), then the quadrant noise (σ = 0.15, top-left ``S/2 × S/2``), then the
  noise of the "noise s=0.05" row; the stand-in is built with ``torch.manual_seed(0)``;
* 2AFC: training triplets from ``default_rng(1)``, test triplets from ``default_rng(2)``; each
  triplet draws a patch, the MSE ratio ``U(0.5, 2)``, a coin for the kind (``< 0.5``: noise, else
  block DCT, the smallest step of ``linspace(0.02, 1, 50)`` whose MSE reaches the target) and a
  coin for the order (``< 0.5``: the shift is ``x1``, label ``h = 1``); stand-in ``k`` is built
  with ``torch.manual_seed(k)``.

None of these numbers are LPIPS values: the stand-in has random weights. The point is the
mechanics: what the weights can and cannot do, and that they are fitted on the distortion kinds
they are then tested on, which flatters them.

Modules: :mod:`.standin` (the network and Eq. 1 on its features), :mod:`.patch_mechanics`
(:func:`mechanics`), :mod:`.triplets` (:func:`make_triplets`), :mod:`.twoafc` (scoring, fitting,
:func:`run_2afc`), :mod:`.real` (the pretrained LPIPS rows), :mod:`.cli` (the command line).

Run ``python -m lpips_explorer.calibration`` for the tables, ``--json`` for one JSON object; the
argument ranges are in :mod:`lpips_explorer.calibration.cli`.
"""

from __future__ import annotations

from lpips_explorer.calibration import common, patch_mechanics, real, standin, triplets, twoafc
from lpips_explorer.calibration.common import DEFAULT_THREADS, Progress, torch_threads
from lpips_explorer.calibration.patch_mechanics import MECHANICS_COLUMNS, MECHANICS_ROWS, Mechanics, MechanicsRow, QuadrantCheck, mechanics
from lpips_explorer.calibration.real import REAL_NETS, RealLPIPSResult, real_lpips_2afc, score_lpips_2afc
from lpips_explorer.calibration.standin import STANDIN_CHANNELS, StandInNet, standin_channel_terms, standin_distance
from lpips_explorer.calibration.triplets import DCT_STEPS, KINDS, Triplets, make_triplets
from lpips_explorer.calibration.twoafc import DEFAULT_NET_SEEDS, Accuracy, StandInResult, TwoAFCResult, fit_lin, run_2afc, score_2afc

__all__ = sorted({*common.__all__, *patch_mechanics.__all__, *real.__all__, *standin.__all__, *triplets.__all__,
                  *twoafc.__all__})
