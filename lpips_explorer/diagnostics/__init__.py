"""Why is this LPIPS score what it is? Checks on an image pair, each with its effect on the score.

Pure analysis behind the "Debug a score" page (no Streamlit). Given two images loaded by
:func:`lpips_core.images.load_image` and a model, :func:`diagnose` runs every check registered
in :data:`CHECKS` (one function each, with a stable id, in this order):

* ``"size"``: whether the two differ, and the LPIPS each way of matching them gives;
* ``"resolution"``: the pair at the files' own size against the app's working size;
* ``"bit_depth"``: what the files stored and what range the pixels span, and the score the same
  pair gets when fed in a wrong range convention;
* ``"alpha"``: transparency composited on white (the loader's default) versus alpha dropped
  and composited on black;
* ``"grayscale"``: a gray image against a colour one, and the score of the pair in gray;
* ``"exif_orientation"``: the tag the loader applied, and the score had it been ignored;
* ``"misalignment"``: a translation estimated by phase correlation
  (:func:`skimage.registration.phase_cross_correlation`, sub-pixel), and LPIPS before and
  after undoing it on the same central crop;
* ``"jpeg_blockiness"`` (:func:`blockiness`), and for scale the scores of the reference itself
  re-encoded as JPEG at a few qualities and with the test file's own JPEG tables;

and where the distance comes from (per-layer terms and the spatial map). Each :class:`Check`
carries its id, a status, the finding, the effect with its numbers, the counterfactual scores
and ``delta``, the largest change of the score among them. Thresholds are named constants of
:mod:`lpips_explorer.diagnostics.checks`. :func:`build_report` turns a :class:`Diagnosis` into a
JSON-ready dict with the full configuration and library versions. :func:`diagnose_files` is the
entry point for two uploaded files: it scores them at their own resolution (capped at
:data:`NATIVE_MAX_SIDE`), runs the checks on the files as decoded and fills every
counterfactual; :func:`rank_checks` orders the findings by how much each moves the score. :func:`layer_breakdown`
shows one pair layer by layer (features, per-position terms, per-channel contributions) for
the "Inside a layer" page.

Modules: :mod:`.tools` (image tools), :mod:`.measures` (resize options, alignment),
:mod:`.checks` (the checks and their registry), :mod:`.diagnosis` (:func:`diagnose`),
:mod:`.report` (JSON), :mod:`.layers` (the layer breakdown).

Every LPIPS score goes through :func:`lpips_core.sweeps.lpips_many` (the reference image's
features are computed once per configuration and reused).
"""

from __future__ import annotations

from lpips_explorer.diagnostics import checks, diagnosis, layers, measures, report, tools
from lpips_explorer.diagnostics.checks import ASPECT_TOLERANCE, BLOCKINESS_THRESHOLD, CHECK_IDS, CHECKS, EIGHT_BIT, JPEG_SCALE_QUALITIES, Finding, MISALIGNMENT_PX, NARROW_RANGE, UPRIGHT_EXIF_TAGS, WRONG_CONVENTIONS, Check, CheckId, CheckSpec, Outcome, PairContext, Status, check_alpha, check_bit_depth, check_exif_orientation, check_grayscale, check_jpeg_blockiness, check_misalignment, check_resolution, check_size, rank_checks, run_checks
from lpips_explorer.diagnostics.diagnosis import NATIVE_MAX_SIDE, SIZE_POLICY, Diagnosis, diagnose, diagnose_files
from lpips_explorer.diagnostics.layers import LayerBreakdown, layer_breakdown
from lpips_explorer.diagnostics.measures import EQUAL_SIZE_SIDES, SQUARE_SIDE, Alignment, ResizeOption, alignment, resize_options
from lpips_explorer.diagnostics.report import build_report, library_versions, report_json
from lpips_explorer.diagnostics.tools import GRAY_TOLERANCE, JPEG_BLOCK, SHIFT_UPSAMPLE, alpha_dropped, blockiness, demo_pair, distinct_levels, encode_like, estimate_shift, image_facts, is_gray, lpips_values, match_size, undo_exif

__all__ = sorted({*checks.__all__, *diagnosis.__all__, *layers.__all__, *measures.__all__, *report.__all__,
                  *tools.__all__})
