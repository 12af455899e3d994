"""The per-process state of the cluster fixtures, and what preparation fixtures share across the processes of a run.

One :class:`ClusterSession` per pytest process, in ``config.stash`` under :data:`SESSION_KEY`: the run's shared
directory (``cluster/rundir.py``), the :class:`Cluster` once this process opened it, the simulator when this process
started it. The public sharing functions (``topsail.run_once``, ``add_cleanup``, ``shared_dir``, ``opened_cluster``)
work on it. Light at import (no Kubernetes client, no pydantic): the pytest-facing ``cluster.plugin`` reads it in
every run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_topsail.cluster.clock import ClusterClock
from pytest_topsail.cluster.rundir import RunDir, process_exists
from pytest_topsail.errors import TopsailError
from pytest_topsail.progress import Progress
from pytest_topsail.run import chosen_cluster, state_of

if TYPE_CHECKING:
    from pytest_topsail.cluster.settings import ClusterSettings
    from pytest_topsail.kube.client import Kube, ObjectRef


@dataclass
class Cluster:
    """What the tests get: a connection (`kube`, a `pytest_topsail.kube.Kube`) and how to reach the cluster."""

    mode: str  # "sim" | "kube"
    kube: Kube
    kubeconfig_path: Path
    context: str | None
    url: str
    facts: dict[str, Any]
    audit_log_path: Path | None = None
    sim_pid: int | None = None  # the simulator's process, when this run started one
    started_by: str = ""  # which process of the run started it ("worker gw0 (pid 123)")
    time_scales: dict[str, float] = field(default_factory=dict)  # the simulator's, by controller plugin (clock.py)

    def clock(self, plugin: str) -> ClusterClock:
        """A clock of cluster time for the events the simulator's controller plugin `plugin` runs on its
        ``time_scale`` (``kserve``: model download and load, 0.02 by default; ``fine_tuning``: training): wall
        intervals divided by that scale. On a real cluster, the wall clock (pytest_topsail/cluster/clock.py)."""
        if self.mode != "sim":
            return ClusterClock()
        if plugin not in self.time_scales:
            known = ", ".join(f"{name} ({scale:g})" for name, scale in sorted(self.time_scales.items())) or "none"
            raise TopsailError(f"cluster.clock({plugin!r}): no simulator plugin of this run called {plugin!r} has a "
                               f"time_scale; those that have one: {known}")
        return ClusterClock(self.time_scales[plugin])

    def labels(self) -> dict[str, Any]:
        from pytest_topsail.cluster.facts import fact_labels

        return fact_labels(self.mode, self.facts)

    def lost(self) -> str | None:
        """Why the simulator of the run is gone (its owner died: the xdist worker that started it), if it is."""
        if self.sim_pid is None or process_exists(self.sim_pid):
            return None
        return (f"the simulated cluster of the run ({self.url}, pid {self.sim_pid}) is gone: it was started by "
                f"{self.started_by}, which has died (a crashed or killed xdist worker takes its simulator with it); "
                "the items still to run cannot use it")


def _default_settings() -> ClusterSettings:
    from pytest_topsail.cluster.settings import ClusterSettings

    return ClusterSettings()


@dataclass
class ClusterSession:
    """Per-process state of the cluster fixtures (in ``config.stash``)."""

    config: pytest.Config
    run: RunDir
    cluster: Cluster | None = None
    sim: Any = None  # the SimCluster when this process started it
    settings: ClusterSettings = field(default_factory=_default_settings)
    progress: Progress | None = None

    def tell(self, message: str) -> None:
        (self.progress or Progress(self.config))(message)

    @property
    def discards_cluster(self) -> bool:
        """True when the cluster is a simulator started for this run: cleanups are pointless then."""
        return self.cluster is not None and self.cluster.mode == "sim"


SESSION_KEY: pytest.StashKey[ClusterSession] = pytest.StashKey()  # per-process state of the cluster fixtures


def cluster_mode(config: pytest.Config) -> str:
    """sim or kube: the cluster the run uses (``--cluster``, implied by ``--kubeconfig``/``--context``)."""
    return chosen_cluster(config)


def cluster_session(config: pytest.Config) -> ClusterSession:
    state = config.stash.get(SESSION_KEY, None)
    if state is None:
        state = ClusterSession(config, RunDir(state_of(config).run_id))
        config.stash[SESSION_KEY] = state
    return state


# -- what preparation fixtures share across the processes of a run (public: topsail.run_once, ...) ----------------
def run_once(config: pytest.Config, key: str, produce: Callable[[], dict[str, Any]], *,
             wait_timeout: float) -> dict[str, Any]:
    """`produce()` in the first process of the run that gets here (xdist workers included); the others wait up to
    `wait_timeout` s and get its JSON result, or fail with its error message."""
    return cluster_session(config).run.run_once(key, produce, wait_timeout=wait_timeout)


def add_cleanup(config: pytest.Config, name: str, refs: list[ObjectRef], timeout_s: float) -> bool:
    """Delete `refs` (newest first) at the end of the run, in the last process out; False (nothing registered) when
    the cluster is a simulator started for this run, discarded anyway."""
    state = cluster_session(config)
    if state.discards_cluster:
        return False
    state.run.add_cleanup({"name": name, "refs": [ref.to_dict() for ref in refs], "timeout_s": timeout_s})
    return True


def opened_cluster(config: pytest.Config) -> Cluster | None:
    """The cluster of the run when this process has opened it (the ``cluster`` fixture ran here), else None."""
    state = config.stash.get(SESSION_KEY, None)
    return state.cluster if state is not None else None


def shared_dir(config: pytest.Config) -> Path:
    """The run's private directory shared by its processes (mode 0700, never under the artifacts): for lock files."""
    return cluster_session(config).run.path
