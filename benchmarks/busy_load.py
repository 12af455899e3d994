"""Background CPU load for benchmarks and reliability runs: N processes spinning in bounded busy loops.

    python benchmarks/busy_load.py [--processes 2] [--seconds 600]

Each process spins until ``--seconds`` have passed (or SIGTERM/SIGINT), then exits; the parent waits for them and
ends them on SIGTERM, so nothing outlives the run. Used by benchmarks/false_regressions.py (``--busy N``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import signal
import sys
import time
from types import FrameType


def spin(seconds: float) -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    end = time.monotonic() + seconds
    count = 0
    while time.monotonic() < end:
        count += 1  # pure CPU: a core kept busy, no memory or I/O


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=600.0, help="upper bound of the load's duration")
    args = parser.parse_args()
    workers = [multiprocessing.Process(target=spin, args=(args.seconds,), daemon=True)
               for _ in range(args.processes)]
    for worker in workers:
        worker.start()

    def stop(signum: int, frame: FrameType | None) -> None:
        for worker in workers:
            worker.terminate()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for worker in workers:
        worker.join(args.seconds + 10)
        if worker.is_alive():
            worker.terminate()


if __name__ == "__main__":
    main()
