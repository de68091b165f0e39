"""``python -m lpips_core COMMAND ...``: the command line, :mod:`lpips_core.cli`."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
