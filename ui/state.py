"""The session-state keys the app shares between its files, as named constants (no Streamlit here).

One name per key, so that a key written in one file and read in another cannot drift apart.
Widget keys that only their own page reads (``svb_shift``, ``lab_opacity``, …) stay in the page.

Sidebar (widget keys, read by every page through :func:`ui.sidebar_spec`):

- :data:`NET`, :data:`VERSION`, :data:`LIN`: the sidebar metric's configuration.
- :data:`WORKING_SIDE`: the longer side photos and uploads are brought to (px).

The reference image, chosen once and shared by every page:

- :data:`REF_IMAGE` (``(H, W, 3)`` float32 in ``[0, 1]``), :data:`REF_NAME`, :data:`REF_NOTICES`.
- :data:`REF_SOURCE`, :data:`REF_SAMPLE`, :data:`REF_UPLOAD` and the ``REF_SYNTH_*`` keys: the
  reference picker's widgets; :data:`REF_UPLOAD_KEY` (the last upload's content key, see
  :func:`ui.choices.upload_key`) and :data:`REF_UPLOAD_ERROR` (its loader message, or ``None``).

Between pages:

- :data:`LAB_CHAIN`: the Distortion lab's chain, a list of ``(name, params)`` steps (JSON-
  serialisable), read by the Conventions and Inside-a-layer pages.
- :data:`EXTRA_METRICS`: the metrics the pages compute beside the sidebar's (spec names, of
  :data:`ui.choices.EXTRA_SPECS`); each page's own picker reads and writes it.

Page-local state: :data:`LAB_STEPS`, :data:`LAB_NEXT_ID` (the lab's editable chain) and
:data:`CAL_LAST` (the Calibration lab's last submitted settings).
"""

from __future__ import annotations

NET = "net"
VERSION = "version"
LIN = "lin"
WORKING_SIDE = "working_side"

REF_IMAGE = "ref_image"
REF_NAME = "ref_name"
REF_NOTICES = "ref_notices"
REF_SOURCE = "ref_source"
REF_SAMPLE = "ref_sample"
REF_UPLOAD = "ref_upload"
REF_UPLOAD_KEY = "ref_upload_key"
REF_UPLOAD_ERROR = "ref_upload_error"
REF_SYNTH_KIND = "ref_synth_kind"
REF_SYNTH_SIZE = "ref_synth_size"
REF_SYNTH_SEED = "ref_synth_seed"
REF_SYNTH_PERIOD = "ref_synth_period"

LAB_CHAIN = "lab_chain"
EXTRA_METRICS = "extra_metrics"

LAB_STEPS = "lab_steps"
LAB_NEXT_ID = "lab_next_id"
LAB_ADD_NAME = "lab_add_name"
CAL_LAST = "cal_last"
