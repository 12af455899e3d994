"""What the simulated pods do on their GPUs and CPUs: the one interface between the domain simulations (training,
serving, ...) and the simulator's metric exporters (sim/node/exporters.py).

A controller that knows what a pod does reports it with ``gpu_activity(store).report(pod uid, use)``, where
``use`` answers ``sample(now) -> Usage`` (per GPU of the pod: utilization in percent and memory used in MiB; per
container: CPU cores and working-set bytes). ``Phases`` is a timeline known in advance (a training plan); ``Live``
reads callables at each sample (a model server's batch occupancy). ``forget`` drops a pod (the exporters also drop
the pods that no longer exist); pods nobody reported use their GPUs not at all. The exporters read only this registry
and the store: they know no domain.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pytest_topsail.sim.machinery.per_store import PerStore


@dataclass(frozen=True)
class Usage:
    gpu_utilization: float = 0.0  # percent, 0-100, on each GPU of the pod
    gpu_memory_mib: float = 0.0  # on each GPU of the pod
    cpu_cores: float = 0.0  # of the pod's main container
    memory_bytes: float = 0.0  # working set of the pod's main container


IDLE = Usage()


class GpuUse(Protocol):
    @property
    def container(self) -> str: ...  # the pod's container doing the work ("" for its first)

    def sample(self, now: float) -> Usage: ...


@dataclass(frozen=True)
class Phases:
    """A timeline in wall-clock seconds: ``steps[i] = (start, usage)`` sorted by start; before the first, idle; the
    last step lasts until the pod is forgotten (or stops running)."""

    steps: tuple[tuple[float, Usage], ...]
    container: str = ""

    def sample(self, now: float) -> Usage:
        index = bisect.bisect_right([start for start, _ in self.steps], now) - 1
        return self.steps[index][1] if index >= 0 else IDLE


@dataclass(frozen=True)
class Live:
    """Read at each sample: e.g. a model server's running batch."""

    read: Callable[[], Usage]
    container: str = ""

    def sample(self, now: float) -> Usage:
        return self.read()


class GpuActivity:
    """The registry of one simulated cluster: pod uid -> what the pod does."""

    def __init__(self) -> None:
        self._uses: dict[str, GpuUse] = {}

    def report(self, uid: str, use: GpuUse) -> None:
        self._uses[uid] = use

    def forget(self, uid: str) -> None:
        self._uses.pop(uid, None)

    def get(self, uid: str) -> GpuUse | None:
        return self._uses.get(uid)

    def retain(self, uids: set[str]) -> None:
        """Drop what pods no longer in ``uids`` did."""
        for uid in [uid for uid in self._uses if uid not in uids]:
            del self._uses[uid]


gpu_activity = PerStore(GpuActivity)  # gpu_activity(store): the registry of the cluster `store` belongs to
