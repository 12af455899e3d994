"""Workload runtimes: how a plugin tells the pod lifecycle what a container does once it runs.

A runtime is a callable `runtime(pod) -> WorkloadPlan | None`, added to a store's pod lifecycle with
`add_runtime(store, runtime)` (typically by a controller plugin in its `on_start`, removed in `stop`). When a bound
pod's containers are planned, the first runtime that returns a plan decides the run time, exit code, termination
reason and timed log lines of the plan's container (the container commands' own plan, controllers/containers.py,
decides the others). This keeps domain models (e.g. the fine-tuning trainer, pytest_topsail.fine_tuning.simulation)
out of the simulator.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_topsail.sim.node.gpuactivity import Usage


@dataclass
class WorkloadPlan:
    container: str  # the container the plan is about
    run_seconds: float  # wall clock, from the container start
    exit_code: int = 0
    reason: str = ""  # termination reason when not Completed/Error (OOMKilled)
    logs: list[tuple[float, str]] = field(default_factory=list)  # (wall offset, line)
    preamble: int = 0  # how many log lines come before the work starts (a hung workload writes only these)
    # what the pod does on its GPUs and CPU from each wall offset on (sim/node/gpuactivity.py; the metric exporters)
    usage: list[tuple[float, Usage]] = field(default_factory=list)


Runtime = Callable[[dict[str, Any]], WorkloadPlan | None]

_runtimes: weakref.WeakKeyDictionary[Any, list[Runtime]] = weakref.WeakKeyDictionary()


def add_runtime(store: Any, runtime: Runtime) -> None:
    _runtimes[store] = [*_runtimes.get(store, ()), runtime]


def remove_runtime(store: Any, runtime: Runtime) -> None:
    _runtimes[store] = [r for r in _runtimes.get(store, ()) if r != runtime]


def workload_plan(store: Any, pod: dict[str, Any]) -> WorkloadPlan | None:
    """The plan of the first runtime of the store that knows the pod, else None."""
    for runtime in _runtimes.get(store, ()):
        plan = runtime(pod)
        if plan is not None:
            return plan
    return None
