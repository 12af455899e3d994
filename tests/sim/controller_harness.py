"""Helpers of the controller behaviour tests: an in-process Store with the controllers started from a profile,
objects to create, and waits with a timeout (no pytest-asyncio: each test runs its scenario with asyncio.run)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from pytest_topsail.sim.controllers import start_controllers
from pytest_topsail.sim.profile import Profile
from pytest_topsail.sim.store import Store

WAIT_SECONDS = 10.0

# Fast stages so that scenarios take milliseconds; tests that look at timings set their own.
FAST_STAGES: dict[str, Any] = {
    "schedule": {"delay_ms": 0}, "initialize": {"delay_ms": 0}, "start": {"delay_ms": 0}, "ready": {"delay_ms": 0},
    "complete": {"delay_ms": 50}, "restart_backoff": {"delay_ms": 20},
}

CORE = [
    "pytest_topsail.sim.controllers.nodes:NodeController",
    "pytest_topsail.sim.controllers.scheduler:Scheduler",
    "pytest_topsail.sim.controllers.pods:PodLifecycle",
    "pytest_topsail.sim.controllers.jobs:JobController",
    "pytest_topsail.sim.controllers.deployments:DeploymentController",
    "pytest_topsail.sim.controllers.services:ServiceController",
    "pytest_topsail.sim.controllers.pvcs:VolumeController",
]


def profile(**sections: Any) -> Profile:
    data: dict[str, Any] = {"seed": 7, "stages": FAST_STAGES,
                            "node_pools": [{"name": "gpu", "count": 2, "gpu_profile": "a100"}]}
    data.update(sections)
    return Profile.from_dict(data, source="test profile")


class Sim:
    """A store with running controllers, and shortcuts to its resource types."""

    def __init__(self, store: Store) -> None:
        self.store = store
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
    if requests:
        container["resources"] = {"requests": requests}
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
    controllers = await start_controllers(store, prof, CORE if specs is None else specs)
    try:
        yield Sim(store)
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


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(scenario(), WAIT_SECONDS * 3))
