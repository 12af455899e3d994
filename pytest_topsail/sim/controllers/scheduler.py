"""Scheduler: binds pending pods to nodes (requests of cpu, memory, nvidia.com/gpu and pods; nodeSelector; required
node affinity; taints and tolerations), sets PodScheduled and records Scheduled / FailedScheduling events.

Allocations are tracked incrementally from pod events (see scheduling.py). Pods that fit nowhere stay Pending with
PodScheduled=False/Unschedulable and are tried again when capacity appears (a node changes, a pod ends or goes away).
Pods chosen by a `never_schedule` fault of the profile are never bound.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, cast

from pytest_topsail.sim.controllers.base import Controller, now_seconds, set_condition, stable_fraction
from pytest_topsail.sim.controllers.containers import stage_override
from pytest_topsail.sim.controllers.profile import PodFault, Stage
from pytest_topsail.sim.controllers.scheduling import ClusterState, PodNeeds, node_info, pod_needs

SCHEDULER_NAME = "default-scheduler"
TERMINAL = ("Succeeded", "Failed")
NEVER_SCHEDULE_REASON = "pod never schedules (fault injected by the simulator profile)"
RETRY_DELAY = 0.05  # seconds: capacity changes are coalesced before pending pods are tried again


def pod_fault(faults: list[PodFault], seed: int, pod: dict[str, Any], action: str) -> PodFault | None:
    """The first fault of `action` that picks this pod (its selector matches and the seeded draw falls in)."""
    meta = pod.get("metadata") or {}
    namespace, name = meta.get("namespace") or "", meta.get("name") or ""
    labels = meta.get("labels") or {}
    for number, fault in enumerate(faults):
        if fault.action != action or not fault.selector.matches(namespace, name, labels):
            continue
        if fault.fraction >= 1.0 or stable_fraction(seed, "pod-fault", number, namespace, name) < fault.fraction:
            return fault
    return None


def stage_for(pod: dict[str, Any], stage_name: str, default: Stage) -> Stage:
    """The profile's stage with the pod's `sim.topsail.io/<stage>-delay-ms` / `-jitter-ms` annotations applied."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    delay, jitter = stage_override(annotations, stage_name)
    if delay is None and jitter is None:
        return default
    return Stage(delay_ms=default.delay_ms if delay is None else delay,
                 jitter_ms=default.jitter_ms if jitter is None else jitter)


class Scheduler(Controller):
    name = "scheduler"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pods = self.store.resource_type("pods")
        self.nodes = self.store.resource_type("nodes")
        self.state = ClusterState()
        self.waiting: set[tuple[str, str]] = set()  # pods seen unbound, not yet placed
        self.unschedulable: dict[tuple[str, str], str] = {}  # pod -> last message written
        self.failed_needs: dict[PodNeeds, str] = {}  # needs that fit nowhere since the last capacity change
        self.binds = 0

    async def on_start(self) -> None:
        self.watch("nodes", "", self._on_node)
        self.watch("pods", "", self._on_pod)
        for node in self.store.list(self.nodes):
            self._on_node("ADDED", node)
        for pod in self.store.list(self.pods):
            self._on_pod("ADDED", pod)

    # events ---------------------------------------------------------------------------------------------------------
    def _on_node(self, event_type: str, node: dict[str, Any]) -> None:
        if event_type == "DELETED":
            self.state.remove_node(node["metadata"]["name"])
            return
        if self.state.set_node(node_info(node)):
            self._capacity_changed()

    def _on_pod(self, event_type: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        spec = pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase")
        if event_type == "DELETED" or phase in TERMINAL:
            self.waiting.discard(key)
            self.unschedulable.pop(key, None)
            self.cancel_timer(key)
            if self.state.release(key):
                self._capacity_changed()
            return
        node = spec.get("nodeName")
        if node:
            self.waiting.discard(key)
            self.unschedulable.pop(key, None)
            if key not in self.state.allocations:  # bound by someone else, or before we started
                self.state.allocate(key, node, pod_needs(pod).requests)
            return
        if spec.get("schedulerName", SCHEDULER_NAME) != SCHEDULER_NAME or meta.get("deletionTimestamp"):
            return
        if key not in self.waiting:
            self.waiting.add(key)
            stage = stage_for(pod, "schedule", self.profile.stages.schedule)
            self.enqueue_after(self.delay(stage, *key), key)

    def _capacity_changed(self) -> None:
        self.failed_needs.clear()
        if self.unschedulable and not self.has_timer("retry"):
            self.call_later(RETRY_DELAY, "retry", self._retry)

    def _retry(self) -> None:
        for key in list(self.unschedulable):
            self.enqueue(key)

    # placing --------------------------------------------------------------------------------------------------------
    async def reconcile(self, key: Hashable) -> None:
        namespace, name = cast(tuple[str, str], key)
        pod = self.store.find(self.pods, namespace, name)
        if pod is None or (pod.get("spec") or {}).get("nodeName") or key not in self.waiting:
            return
        if pod_fault(self.profile.faults.pods, self.seed, pod, "never_schedule") is not None:
            message = f"0/{len(self.state.nodes)} nodes are available: {NEVER_SCHEDULE_REASON}."
            self._mark_unschedulable(key, pod, message)
            return
        needs = pod_needs(pod)
        if needs in self.failed_needs:  # an identical pod found no room since the last capacity change
            self._mark_unschedulable(key, pod, self.failed_needs[needs])
            return
        placement = self.state.place(needs)
        if placement.node is None:
            self.failed_needs[needs] = placement.message
            self._mark_unschedulable(key, pod, placement.message)
            return
        self._bind(key, pod, placement.node, needs)

    def _bind(self, key: tuple[str, str], pod: dict[str, Any], node: str, needs: PodNeeds) -> None:
        self.state.allocate(key, node, needs.requests)
        status = dict(pod.get("status") or {})
        status["conditions"] = set_condition(list(status.get("conditions") or ()), {
            "type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_seconds(),
        })
        try:
            bound = self.store.update(self.pods, {**pod, "spec": {**pod["spec"], "nodeName": node}, "status": status},
                                      subresource="binding")
        except Exception:
            self.state.release(key)
            raise
        self.waiting.discard(key)
        self.unschedulable.pop(key, None)
        self.binds += 1
        self.store.record_event(bound, "Scheduled", f"Successfully assigned {key[0]}/{key[1]} to {node}",
                                source=SCHEDULER_NAME)

    def _mark_unschedulable(self, key: tuple[str, str], pod: dict[str, Any], message: str) -> None:
        if self.unschedulable.get(key) == message:
            return
        self.unschedulable[key] = message
        status = dict(pod.get("status") or {})
        status["conditions"] = set_condition(list(status.get("conditions") or ()), {
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
            "lastProbeTime": None, "lastTransitionTime": now_seconds(),
        })
        updated = self.store.update(self.pods, {**pod, "status": status}, subresource="status")
        self.store.record_event(updated, "FailedScheduling", message, type="Warning", source=SCHEDULER_NAME)
