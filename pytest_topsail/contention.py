"""The machine's CPU contention while a test runs: the mean number of runnable tasks per CPU it really had.

A KPI measured on this machine's own clock around work this machine does (an API round trip to the simulator, the
watch delivering its event) moves with how busy the machine is, whatever the code under test does. The ``kpis``
fixture samples the contention during each test and stores it with the test's KPIs (``machine_load``), so that a
verdict on such a KPI (declared ``machine_bound=True``) can tell a slower cluster from a busier machine
(docs/kpis-and-regressions.md). The source is the count of runnable tasks of ``/proc/loadavg``, sampled every 0.1 s
(the load average is the same count averaged over a minute: too slow for a test of a few seconds); elsewhere than
on Linux nothing is sampled and verdicts are as without it.

On a virtual machine the hypervisor may run other guests on our CPUs: the kernel counts that time as *steal*
(``/proc/stat``), and a task waits for it as for another runnable task, though no runnable count shows it. So the
count is taken per CPU left to us: divided by the share of CPU time not stolen during the test (a test with 1.2
runnable tasks per CPU while 40% of the CPU time was stolen had 2.0 per CPU it really had).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

LOADAVG = Path("/proc/loadavg")
STAT = Path("/proc/stat")
INTERVAL_S = 0.1
MAX_STEAL = 0.9  # a steal share is capped here: the count is multiplied at most 10 times


def runnable_tasks(path: Path = LOADAVG) -> int | None:
    """Tasks running or waiting for a CPU now, this reader excluded (field 4 of /proc/loadavg: running/total)."""
    try:
        running = path.read_text(encoding="ascii").split()[3].split("/")[0]
        return max(int(running) - 1, 0)
    except (OSError, IndexError, ValueError):
        return None


def cpu_times(path: Path = STAT) -> tuple[int, int] | None:
    """(steal, total) CPU time of all CPUs since boot, in clock ticks (the ``cpu`` line of /proc/stat), or None."""
    try:
        with path.open(encoding="ascii") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 8:  # user nice system idle iowait irq softirq steal [guest guest_nice: inside user and nice]
        return None
    return fields[7], sum(fields[:8])


def steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float:
    """The share of CPU time the hypervisor took between two ``cpu_times`` readings (0 when unknown)."""
    if before is None or after is None or after[1] <= before[1]:
        return 0.0
    return min(max((after[0] - before[0]) / (after[1] - before[1]), 0.0), MAX_STEAL)


class ContentionSampler:
    """Samples runnable tasks per CPU in a daemon thread from ``start()`` to ``stop()`` (which returns the mean)."""

    def __init__(self, interval_s: float = INTERVAL_S, path: Path = LOADAVG, stat_path: Path = STAT) -> None:
        self.interval_s = interval_s
        self.path = path
        self.stat_path = stat_path
        self.cpu_times_at_start: tuple[int, int] | None = None
        self.cpus = os.cpu_count() or 1
        self.samples: list[int] = []
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> ContentionSampler:
        if runnable_tasks(self.path) is not None:
            self.cpu_times_at_start = cpu_times(self.stat_path)
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
        """The mean runnable tasks per CPU left to us (not stolen) over the samples, or None when nothing could be
        sampled."""
        self.stopped.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
        if not self.samples:
            return None
        stolen = steal_share(self.cpu_times_at_start, cpu_times(self.stat_path))
        return round(sum(self.samples) / len(self.samples) / (self.cpus * (1 - stolen)), 3)
