"""Intervals in the cluster's time, read on this process's clock (``cluster.clock(plugin)``, a ``ClusterClock``).

The simulator runs some cluster events faster than a real cluster would: a controller plugin with a ``time_scale``
setting (wall seconds per simulated second: ``cluster.sim.plugins.kserve.time_scale``, default 0.02, for model
download and load; ``plugins.fine_tuning.time_scale`` for training) compresses them that much. An interval of such
events measured on the client's clock is the wall interval; in the cluster's time it is that interval divided by the
time scale: what a real cluster would have taken. On a real cluster the two are the same (time scale 1).

``simulator_time_scales(profile)`` reads each plugin's time scale from a simulator profile (the plugin's default when
the profile does not set it), once, in the process that starts the simulator; the ``cluster`` fixture hands them to
every process of the run. Timing a cluster event through a clock counts the client's own overhead (its requests, its
polling interval) at the same rate: poll often (``topsail.wait_for(..., interval=...)``) when the interval is short.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_topsail.sim.controllers.profile import Profile


class ClusterClock:
    """Seconds of cluster time: the readings of `source` (default ``time.monotonic``) divided by `time_scale` (wall
    seconds per cluster second, 1 on a real cluster)."""

    def __init__(self, time_scale: float = 1.0, source: Callable[[], float] = time.monotonic) -> None:
        if not time_scale > 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale}")
        self.time_scale = time_scale
        self._source = source

    def now(self) -> float:
        """Cluster seconds since an arbitrary origin: only differences mean something."""
        return self._source() / self.time_scale

    def elapsed(self, start: float) -> float:
        """Cluster seconds since `start` (a `now()` reading)."""
        return self.now() - start

    @contextmanager
    def measure(self) -> Iterator[Interval]:
        """``with clock.measure() as interval: ...``: `interval.seconds`, in cluster time, so far inside the block and
        fixed when the block ends (also when it raises)."""
        interval = Interval(self, self.now())
        try:
            yield interval
        finally:
            interval.end = self.now()

    def __repr__(self) -> str:
        return f"ClusterClock(time_scale={self.time_scale:g})"


@dataclass
class Interval:
    """An interval measured by ``ClusterClock.measure``, in cluster seconds."""

    clock: ClusterClock
    start: float
    end: float | None = None

    @property
    def seconds(self) -> float:
        return (self.clock.now() if self.end is None else self.end) - self.start


def simulator_time_scales(profile: Profile) -> dict[str, float]:
    """Controller plugin name -> its ``time_scale`` in `profile` (its settings model's default when the profile does
    not set it), for each controller of the run whose settings have one."""
    from pytest_topsail.sim.controllers import controller_class, run_specs

    scales: dict[str, float] = {}
    for controller in map(controller_class, run_specs(profile)):
        model = controller.settings_model
        if model is not None and "time_scale" in model.model_fields:
            settings = model.model_validate(profile.plugins.get(controller.name) or {})
            scales[controller.name] = float(getattr(settings, "time_scale"))  # noqa: B009 - a field, not a name
    return scales
