"""The machine's CPU contention while a test runs: the mean number of runnable tasks per CPU.

A KPI measured on this machine's own clock around work this machine does (an API round trip to the simulator, the
watch delivering its event) moves with how busy the machine is, whatever the code under test does. The ``kpis``
fixture samples the contention during each test and stores it with the test's KPIs (``machine_load``), so that a
verdict on such a KPI (declared ``machine_bound=True``) can tell a slower cluster from a busier machine
(docs/kpis-and-regressions.md). The source is the count of runnable tasks of ``/proc/loadavg``, sampled every 0.1 s
(the load average is the same count averaged over a minute: too slow for a test of a few seconds); elsewhere than
on Linux nothing is sampled and verdicts are as without it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

LOADAVG = Path("/proc/loadavg")
INTERVAL_S = 0.1


def runnable_tasks(path: Path = LOADAVG) -> int | None:
    """Tasks running or waiting for a CPU now, this reader excluded (field 4 of /proc/loadavg: running/total)."""
    try:
        running = path.read_text(encoding="ascii").split()[3].split("/")[0]
        return max(int(running) - 1, 0)
    except (OSError, IndexError, ValueError):
        return None


class ContentionSampler:
    """Samples runnable tasks per CPU in a daemon thread from ``start()`` to ``stop()`` (which returns the mean)."""

    def __init__(self, interval_s: float = INTERVAL_S, path: Path = LOADAVG) -> None:
        self.interval_s = interval_s
        self.path = path
        self.cpus = os.cpu_count() or 1
        self.samples: list[int] = []
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> ContentionSampler:
        if runnable_tasks(self.path) is not None:
            self.thread = threading.Thread(target=self._run, name="topsail-contention", daemon=True)
            self.thread.start()
        return self

    def _run(self) -> None:
        while True:
            count = runnable_tasks(self.path)
            if count is not None:
                self.samples.append(count)
            if self.stopped.wait(self.interval_s):
                return

    def stop(self) -> float | None:
        """The mean runnable tasks per CPU over the samples, or None when nothing could be sampled."""
        self.stopped.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
        if not self.samples:
            return None
        return round(sum(self.samples) / len(self.samples) / self.cpus, 3)
