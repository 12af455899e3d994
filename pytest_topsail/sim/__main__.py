"""Entry point: ``python -m pytest_topsail.sim --help``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
