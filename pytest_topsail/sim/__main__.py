"""Entry point: ``python -m pytest_topsail.sim --help``."""

import os
import sys

from pytest_topsail.sim.run.cli import main

if __name__ == "__main__":
    code = main()
    # Stopped means discarded: the interpreter's own teardown (freeing every stored object, joining gRPC's and the
    # reference servers' threads) would keep the run waiting about 0.5 s more for nothing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
