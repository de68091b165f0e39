"""``python -m lpips_explorer.calibration [--json]``: see :mod:`lpips_explorer.calibration.cli`."""

from lpips_explorer.calibration.cli import main

raise SystemExit(main())
