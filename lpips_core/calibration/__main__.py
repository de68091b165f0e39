"""``python -m lpips_core.calibration [--json]``: see :mod:`lpips_core.calibration.cli`."""

from .cli import main

raise SystemExit(main())
