"""Helpers of the controller behaviour tests: an in-process Store with the controllers started from a profile,
objects to create, and waits with a timeout (no pytest-asyncio: each test runs its scenario with `run`).

`run(scenario, virtual_time=True)` runs the scenario on an event loop whose clock jumps to the next timer whenever
nothing else is ready: stage delays then take no real time and their effects can be asserted exactly, whatever the
load of the machine (controllers schedule every delay with the loop's call_later).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from pytest_topsail.sim.controllers import start_controllers
from pytest_topsail.sim.controllers.profile import Profile
from pytest_topsail.sim.registry.store import Store

WAIT_SECONDS = 30.0  # generous: a wait ends as soon as its condition holds; a loaded machine stretches real time

# Fast stages so that scenarios take milliseconds; tests that look at timings set their own.
FAST_STAGES: dict[str, Any] = {
    "schedule": {"delay_ms": 0}, "initialize": {"delay_ms": 0}, "start": {"delay_ms": 0}, "ready": {"delay_ms": 0},
    "complete": {"delay_ms": 50}, "restart_backoff": {"delay_ms": 20},
}

CORE = [
    "pytest_topsail.sim.controllers.rhoai:RhoaiController",  # the kinds of the profile's preinstalled components
    "pytest_topsail.sim.controllers.nodes:NodeController",
    "pytest_topsail.sim.controllers.scheduler:Scheduler",
    "pytest_topsail.sim.controllers.pods:PodLifecycle",
    "pytest_topsail.sim.controllers.jobs:JobController",
    "pytest_topsail.sim.controllers.deployments:DeploymentController",
    "pytest_topsail.sim.controllers.services:ServiceController",
    "pytest_topsail.sim.controllers.pvcs:VolumeController",
]


def profile(**sections: Any) -> Profile:
    data: dict[str, Any] = {"seed": 7, "stages": FAST_STAGES, "preinstalled": ["all"],  # GPUs advertised, kinds served
                            "node_pools": [{"name": "gpu", "count": 2, "gpu_profile": "a100"}]}
    data.update(sections)
    return Profile.from_dict(data, source="test profile")


class Sim:
    """A store with running controllers, and shortcuts to its resource types."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.timeline: Timeline | None = None
        self.nodes = store.resource_type("nodes")
        self.pods = store.resource_type("pods")
        self.events = store.resource_type("events")
        self.jobs = store.resource_type("jobs", "batch")
        self.deployments = store.resource_type("deployments", "apps")
        self.services = store.resource_type("services")
        self.claims = store.resource_type("persistentvolumeclaims")
        self.volumes = store.resource_type("persistentvolumes")

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any]:
        return self.store.get(self.pods, namespace, name)

    def create_pod(self, name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
        return self.store.create(self.pods, pod_object(name, namespace, **spec))

    def event_reasons(self, name: str, namespace: str = "default") -> list[str]:
        return [e["reason"] for e in self.store.list(self.events, namespace)
                if e["involvedObject"]["name"] == name]

    def events_about(self, name: str, reason: str, namespace: str = "default") -> list[dict[str, Any]]:
        return [e for e in self.store.list(self.events, namespace)
                if e["involvedObject"]["name"] == name and e["reason"] == reason]


def pod_object(name: str, namespace: str = "default", *, command: list[str] | None = None,
               requests: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
               labels: dict[str, str] | None = None, restart_policy: str | None = None,
               **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.example/app:1"}
    if command is not None:
        container["command"] = command
    if requests:  # extended resources (nvidia.com/gpu) need their limit, equal to the request
        container["resources"] = {"requests": requests,
                                  "limits": {key: value for key, value in requests.items() if "/" in key}}
    pod_spec: dict[str, Any] = {"containers": [container], **spec}
    if restart_policy:
        pod_spec["restartPolicy"] = restart_policy
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def condition_status(obj: dict[str, Any], kind: str) -> str | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind:
            return cond.get("status")
    return None


def phase(obj: dict[str, Any]) -> str | None:
    return (obj.get("status") or {}).get("phase")


@asynccontextmanager
async def running_sim(prof: Profile, specs: list[str] | None = None):
    store = Store(seed=prof.seed)
    timeline = Timeline(store)
    controllers = await start_controllers(store, prof, CORE if specs is None else specs)
    sim = Sim(store)
    sim.timeline = timeline
    try:
        yield sim
    finally:
        await controllers.stop()


async def wait_for(predicate: Callable[[], Any], what: str, timeout: float = WAIT_SECONDS) -> Any:
    """Poll `predicate` until it returns something truthy; AssertionError naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.01)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose time only moves when it has nothing to do but wait for a timer."""

    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        """The clock moves on as if the process had been blocked (descheduled, a GC pause) for `seconds`."""
        self._virtual_now += seconds

    def _run_once(self) -> None:
        # CPython's loop keeps ready callbacks in _ready and timers in the heap _scheduled (stable in 3.11-3.13).
        if not self._ready and not self._stopping:  # type: ignore[attr-defined]
            pending = [h.when() for h in self._scheduled if not h.cancelled()]  # type: ignore[attr-defined]
            if pending:
                self._virtual_now = max(self._virtual_now, min(pending))
        super()._run_once()  # type: ignore[misc]


def now() -> float:
    """The running loop's clock (virtual seconds under `run(..., virtual_time=True)`)."""
    return asyncio.get_running_loop().time()


def run(scenario: Callable[[], Awaitable[Any]], *, virtual_time: bool = False) -> Any:
    factory = VirtualTimeLoop if virtual_time else None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(asyncio.wait_for(scenario(), WAIT_SECONDS * 3))


class Timeline:
    """Records, at commit time on the loop's clock, each change of a pod's phase / Ready and of a node's Ready."""

    def __init__(self, store: Store) -> None:
        self.entries: list[tuple[float, str, str, str]] = []  # (time, kind, name, what)
        self._last: dict[tuple[str, str], str] = {}
        store.add_listener(self)

    def __call__(self, event_type: str, rtype: Any, obj: dict[str, Any]) -> None:
        if rtype.kind not in ("Pod", "Node") or event_type == "DELETED":
            return
        state = f"{phase(obj) or '-'}/ready={condition_status(obj, 'Ready')}"
        if rtype.kind == "Pod":
            state += f"/node={obj['spec'].get('nodeName')}"
        key = (rtype.kind, obj["metadata"]["name"])
        if self._last.get(key) != state:
            self._last[key] = state
            self.entries.append((round(now(), 6), rtype.kind, obj["metadata"]["name"], state))

    def first(self, kind: str, name: str, predicate: Callable[[str], bool]) -> float:
        """When the object first was in a state for which predicate(state) holds."""
        for when, entry_kind, entry_name, state in self.entries:
            if entry_kind == kind and entry_name == name and predicate(state):
                return when
        raise AssertionError(f"{kind} {name} never reached the state; timeline: {self.entries}")
