"""Faults real GPU clusters have, injected from the profile's `faults.events` at a chosen time on chosen objects, each
showing as it does on a real cluster (docs/simulator-profile.md "Fault events", docs/reliability.md "Fault catalogue").

- gpu_xid: DCGM's DCGM_FI_DEV_XID_ERRORS of the GPU holds the code; the container of the pod using the GPU exits 1
  (a CUDA error in its termination message) and an `XidError` Warning Event about the pod names the Xid, the GPU and
  the node; unless the Xid is an application error the device plugin withdraws the GPU (node allocatable drops).
- gpu_lost: Xid 79 (fallen off the bus), the GPU withdrawn, the pod's container exits 1, a `GPULost` Event.
- ecc: the ECC counters move; an uncorrectable error raises Xid 48 and goes on as gpu_xid.
- node_lost: Ready=Unknown (NodeStatusUnknown) with the `node.kubernetes.io/unreachable` taints, the statuses of
  its pods frozen (their kubelet reports nothing more); after the pods'
  tolerationSeconds of that taint (300 s by default admission; the fault's `toleration_s` instead when set) they are
  Failed (reason NodeLost, condition DisruptionTarget/DeletionByTaintManager, a `TaintManagerEviction` Event).
- evicted: the kubelet evicts the pod under node pressure: Failed, reason Evicted, DisruptionTarget/
  TerminationByKubelet, an `Evicted` Event.
- preempted: the scheduler preempts the pod for a higher-priority one: DisruptionTarget/PreemptionByScheduler, a
  `Preempted` Event, its containers killed (exit 137), Failed.
- image_pull: pods matching the fault that start afterwards stay waiting in ErrImagePull (a `Failed` Event).
- oom: the container is OOMKilled (exit 137).
- volume_attach: pods matching the fault that start afterwards and mount its PVC (`claim`, default any) stay
  ContainerCreating with `FailedAttachVolume`/`FailedMount` Warnings, until attached after `attach_delay_s`, or never
  (volume_faults.py).

Targets and times are resolved by the pure functions below from the seed (`stable_fraction`), so the same profile
hits the same node, GPU and pod in every run. Container ends and image pulls go through the kubelet hooks the pod
lifecycle registers (`kubelet_hooks(store)`): the restart policy applies as for any container exit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, cast

from pytest_topsail.sim.controllers.base import Controller, now_seconds, set_condition, stable_fraction
from pytest_topsail.sim.controllers.profile import FaultEvent, PodSelector
from pytest_topsail.sim.machinery.per_store import PerStore
from pytest_topsail.sim.node.devices import Devices, advertised_status, devices, gpu_count, gpus_requested, xid_text

log = logging.getLogger(__name__)

UNREACHABLE = "node.kubernetes.io/unreachable"
OOM_EXIT = 137
POD_KINDS = ("evicted", "preempted", "oom")
GPU_KINDS = ("gpu_xid", "gpu_lost", "ecc")
PRESSURE = {"memory": "The node was low on resource: memory.", "pid": "The node was low on resource: pids.",
            "ephemeral-storage": "The node was low on resource: ephemeral-storage."}

# namespace, pod, exit code, reason, message, lasting (every restart ends the same way at once) -> ended
Terminate = Callable[[str, str, int, str, str, bool], bool]
Record = Callable[[Devices, str, int], object]  # what a GPU fault records of (node, GPU index)


@dataclass
class KubeletHooks:
    """What the fault injector asks of the kubelets (the pod lifecycle registers `terminate`)."""

    terminate: Terminate | None = None
    pull_failures: list[tuple[PodSelector | None, str]] = field(default_factory=list)
    lost_nodes: set[str] = field(default_factory=set)  # their kubelets report nothing more
    attach_faults: list[FaultEvent] = field(default_factory=list)  # volume_attach faults fired (volume_faults.py)
    attach_waits: dict[str, tuple[float, int]] = field(default_factory=dict)  # pod uid -> (first try, tries)

    def pull_failure(self, pod: dict[str, Any]) -> str | None:
        """Why the pod's images cannot be pulled, or None."""
        for selector, message in self.pull_failures:
            if selector is None or _matches(selector, pod):
                return message
        return None


kubelet_hooks = PerStore(KubeletHooks)  # kubelet_hooks(store): the hooks of the cluster `store` belongs to


# pure target choice --------------------------------------------------------------------------------------------------
def _matches(selector: PodSelector, pod: dict[str, Any]) -> bool:
    meta = pod["metadata"]
    return selector.matches(meta.get("namespace") or "", meta["name"], meta.get("labels") or {})


def _seeded(seed: int, number: int, items: list[Any], name: Callable[[Any], str]) -> list[Any]:
    return sorted(items, key=lambda item: stable_fraction(seed, "fault-event", number, name(item)))


def _pod_name(pod: dict[str, Any]) -> str:
    return f"{pod['metadata'].get('namespace') or ''}/{pod['metadata']['name']}"


def target_pod(event: FaultEvent, seed: int, number: int, trigger: dict[str, Any] | None,
               running: list[dict[str, Any]], need_gpu: bool = False) -> dict[str, Any] | None:
    """The running pod the fault hits: one matching `pod` (on `node` when given), else the pod that triggered it,
    else one on `node`/`pool`; chosen by the seed among several; None when no running pod fits."""
    candidates = [p for p in running if event.node in (None, p["spec"].get("nodeName"))]
    if need_gpu:
        candidates = [p for p in candidates if gpus_requested(p)]
    if event.pod is not None:
        candidates = [p for p in candidates if _matches(event.pod, p)]
    elif trigger is not None:
        candidates = [p for p in candidates if p["metadata"]["uid"] == trigger["metadata"]["uid"]] or candidates
    chosen = _seeded(seed, number, candidates, _pod_name)
    return chosen[0] if chosen else None


def target_gpu(event: FaultEvent, seed: int, number: int, pod: dict[str, Any] | None, gpus: dict[str, int],
               holders: dict[tuple[str, int], dict[str, Any]], pools: dict[str, str]) -> tuple[str, int] | None:
    """(node, GPU index) the fault hits: `gpu` (or, by the seed, one) of `node`; else of the hit pod's GPUs; else
    a GPU of a node of `pool` (any GPU node), by the seed. None when there is no such GPU."""
    if event.node is None and pod is not None:
        held = sorted(index for (node, index), holder in holders.items()
                      if holder["metadata"]["uid"] == pod["metadata"]["uid"])
        if held:
            node = pod["spec"]["nodeName"]
            return node, event.gpu if event.gpu is not None and event.gpu < gpus.get(node, 0) else held[0]
    if event.node is not None:
        nodes = [event.node] if gpus.get(event.node) else []
    else:
        nodes = [n for n in sorted(gpus) if gpus[n] and event.pool in (None, pools.get(n))]
    if not nodes:
        return None
    node = _seeded(seed, number, nodes, str)[0]
    if event.gpu is not None:
        return (node, event.gpu) if event.gpu < gpus[node] else None
    return node, int(stable_fraction(seed, "fault-gpu", number, node) * gpus[node])


def target_node(event: FaultEvent, seed: int, number: int, pod: dict[str, Any] | None,
                pools: dict[str, str]) -> str | None:
    """The node a node_lost fault hits: `node`, the hit pod's node, or one of `pool` (any node) by the seed."""
    if event.node is not None:
        return event.node if event.node in pools else None
    if pod is not None and event.pool is None:
        return str(pod["spec"]["nodeName"])
    nodes = [n for n, pool in pools.items() if event.pool in (None, pool)]
    return _seeded(seed, number, nodes, str)[0] if nodes else None


def disruption(reason: str, message: str, now: str) -> dict[str, Any]:
    return {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message,
            "lastProbeTime": None, "lastTransitionTime": now}


def toleration_seconds(pod: dict[str, Any], instead: float | None) -> float:
    """How long the pod stays on an unreachable node: `instead` when given, else its NoExecute toleration of the
    taint (forever without `tolerationSeconds`), else 0."""
    if instead is not None:
        return instead
    for toleration in (pod.get("spec") or {}).get("tolerations") or ():
        if toleration.get("key") in (UNREACHABLE, None, "") and toleration.get("effect") in ("NoExecute", None, ""):
            seconds = toleration.get("tolerationSeconds")
            return float("inf") if seconds is None else max(0.0, float(seconds))
    return 0.0


# the controller ------------------------------------------------------------------------------------------------------
class FaultInjector(Controller):
    """Fires `faults.events` (opt-in: without events it watches nothing and does nothing)."""

    name = "faults"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events = list(self.profile.faults.events)
        self.pods = self.store.resource_type("pods")
        self.nodes = self.store.resource_type("nodes")
        self.running_seen: dict[int, set[str]] = {}
        self.armed: set[int] = set()

    async def on_start(self) -> None:
        if not self.events:
            return
        for number, event in enumerate(self.events):
            if event.when_running is None:
                self.call_later(event.after_s, ("fire", number), self.enqueue, ("fire", number, None))
        if any(event.when_running is not None for event in self.events):
            self.watch("pods", "", self._on_pod)

    def _on_pod(self, event_type: str, pod: dict[str, Any]) -> None:
        if event_type == "DELETED" or (pod.get("status") or {}).get("phase") != "Running":
            return
        for number, event in enumerate(self.events):
            if event.when_running is None or number in self.armed or not _matches(event.when_running, pod):
                continue
            seen = self.running_seen.setdefault(number, set())
            seen.add(pod["metadata"]["uid"])
            if len(seen) >= event.nth:
                self.armed.add(number)
                key = ("fire", number, (pod["metadata"].get("namespace") or "", pod["metadata"]["name"]))
                self.call_later(event.after_s, ("fire", number), self.enqueue, key)

    async def reconcile(self, key: Hashable) -> None:
        parts = cast(tuple[Any, ...], key)
        if parts[0] == "evict":
            self._evict_from_lost_node(*parts[1:])
            return
        number, trigger_key = parts[1:]
        event = self.events[number]
        trigger = self.store.find(self.pods, *trigger_key) if trigger_key else None
        getattr(self, f"_{event.kind}")(event, number, trigger)

    # the world as the fault finds it -------------------------------------------------------------------------------
    def _running(self) -> list[dict[str, Any]]:
        return [p for p in self.store.list(self.pods) if (p.get("status") or {}).get("phase") == "Running"
                and (p.get("spec") or {}).get("nodeName") and not p["metadata"].get("deletionTimestamp")]

    def _gpus(self) -> dict[str, int]:
        return {n["metadata"]["name"]: gpu_count(n) for n in self.store.list(self.nodes)}

    def _pools(self) -> dict[str, str]:
        return {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get("sim.topsail.io/node-pool", "")
                for n in self.store.list(self.nodes)}

    def _devices(self) -> tuple[Devices, dict[tuple[str, int], dict[str, Any]]]:
        registry = devices(self.store)
        return registry, registry.holders(self._running(), self._gpus())

    def _missed(self, event: FaultEvent, what: str) -> None:
        log.warning("sim faults: %s fault found no %s to hit", event.kind, what)

    # GPU faults ----------------------------------------------------------------------------------------------------
    def _gpu_xid(self, event: FaultEvent, number: int, trigger: dict[str, Any] | None) -> None:
        self._gpu_fault(event, number, trigger, "XidError", lambda r, node, i: r.record_xid(node, i, event.xid))

    def _gpu_lost(self, event: FaultEvent, number: int, trigger: dict[str, Any] | None) -> None:
        self._gpu_fault(event, number, trigger, "GPULost", Devices.lose)

    def _ecc(self, event: FaultEvent, number: int, trigger: dict[str, Any] | None) -> None:
        def record(registry: Devices, node: str, index: int) -> None:
            registry.record_ecc(node, index, event.errors, event.uncorrectable)

        self._gpu_fault(event, number, trigger, "XidError" if event.uncorrectable else "", record)

    def _find_gpu(self, event: FaultEvent, number: int,
                  trigger: dict[str, Any] | None) -> tuple[str, int, dict[str, Any] | None] | None:
        registry, holders = self._devices()
        pod = target_pod(event, self.seed, number, trigger, self._running(), need_gpu=True) \
            if event.pod is not None or trigger is not None else None
        gpu = target_gpu(event, self.seed, number, pod, self._gpus(), holders, self._pools())
        if gpu is None:
            self._missed(event, "GPU")
            return None
        return gpu[0], gpu[1], holders.get(gpu)

    def _gpu_fault(self, event: FaultEvent, number: int, trigger: dict[str, Any] | None, reason: str,
                   record: Record) -> None:
        """Record the fault on the GPU; when it raised an Xid (`reason` not empty): Events on the node and on the
        pod holding the GPU, whose container ends with a CUDA error; a withdrawn GPU leaves the node's allocatable."""
        found = self._find_gpu(event, number, trigger)
        if found is None:
            return
        node, index, holder = found
        registry = devices(self.store)
        was_withdrawn = bool(registry.health(node, index).withdrawn)
        record(registry, node, index)
        health = registry.health(node, index)
        if not reason:
            return
        what = f"{xid_text(health.xid)} on GPU {index} of node {node}"
        node_object = self.store.find(self.nodes, None, node)
        if node_object is not None:
            self.store.record_event(node_object, reason, what, type="Warning", source="nvidia-dcgm")
            if health.withdrawn and not was_withdrawn:
                self._set_allocatable(node_object, registry)
        if holder is None:
            return
        name = holder["metadata"]["name"]
        outcome = "withdrawn by the device plugin" if health.withdrawn else "still allocatable"
        self.store.record_event(holder, reason, f"{what} used by pod {name}; the GPU is {outcome}", type="Warning",
                                source="nvidia-dcgm")
        self._terminate(holder, 1, "Error", f"RuntimeError: CUDA error: {xid_text(health.xid)} on GPU {index} "
                        f"of node {node}", lasting=bool(health.withdrawn))

    def _set_allocatable(self, node: dict[str, Any], registry: Devices) -> None:
        status = advertised_status(node, gpu_count(node), registry)
        if status is not None:
            self.store.update(self.nodes, {**node, "status": status}, subresource="status")

    def _terminate(self, pod: dict[str, Any], code: int, reason: str, message: str, lasting: bool = False) -> None:
        """End the pod's running containers; `lasting`: a restart on the same (withdrawn) GPU fails at once again."""
        hooks = kubelet_hooks(self.store)
        meta = pod["metadata"]
        if hooks.terminate is None or not hooks.terminate(meta.get("namespace") or "", meta["name"], code, reason,
                                                          message, lasting):
            log.warning("sim faults: pod %s has no running container to end", meta["name"])

    # pod faults ----------------------------------------------------------------------------------------------------
    def _pod_target(self, event: FaultEvent, number: int, trigger: dict[str, Any] | None) -> dict[str, Any] | None:
        pod = target_pod(event, self.seed, number, trigger, self._running())
        if pod is None:
            self._missed(event, "running pod")
        return pod

    def _oom(self, event: FaultEvent, number: int, trigger: dict[str, Any] | None) -> None:
        pod = self._pod_target(event, number, trigger)
        if pod is not None:
            self._terminate(pod, OOM_EXIT, "OOMKilled", "")

    def _evicted(self, event: FaultEvent, number: int, trigger: dict[str, Any] | None) -> None:
        pod = self._pod_target(event, number, trigger)
        if pod is None:
            return
        message = f"{PRESSURE[event.resource]} Evicted from node {pod['spec']['nodeName']}."
        self._fail_pod(pod, "Evicted", message, disruption("TerminationByKubelet", message, now_seconds()))
        self.store.record_event(pod, "Evicted", message, type="Warning", source="kubelet")

    def _preempted(self, event: FaultEvent, number: int, trigger: dict[str, Any] | None) -> None:
        pod = self._pod_target(event, number, trigger)
        if pod is None:
            return
        node = pod["spec"]["nodeName"]
        message = f"Preempted by a higher-priority pod on node {node}"
        self.store.record_event(pod, "Preempted", message, source="default-scheduler")
        self._fail_pod(pod, "", "", disruption("PreemptionByScheduler", "default-scheduler: preempting to "
                                               "accommodate a higher priority pod", now_seconds()), exit_code=137)

    def _image_pull(self, event: FaultEvent, number: int, trigger: dict[str, Any] | None) -> None:
        message = "failed to pull and unpack image: the registry answered 503 Service Unavailable"
        kubelet_hooks(self.store).pull_failures.append((event.pod, message))

    def _volume_attach(self, event: FaultEvent, number: int, trigger: dict[str, Any] | None) -> None:
        kubelet_hooks(self.store).attach_faults.append(event)

    def _fail_pod(self, pod: dict[str, Any], reason: str, message: str, condition: dict[str, Any],
                  exit_code: int = 137) -> None:
        """The pod Failed with its containers killed (exit 137), `reason`/`message` on its status."""
        now = now_seconds()
        status = dict(pod.get("status") or {})
        status["phase"] = "Failed"
        if reason:
            status["reason"], status["message"] = reason, message
        conditions = set_condition(list(status.get("conditions") or ()), condition)
        for kind in ("Ready", "ContainersReady"):
            conditions = set_condition(conditions, {"type": kind, "status": "False", "reason": "PodFailed",
                                                    "lastProbeTime": None, "lastTransitionTime": now})
        status["conditions"] = conditions
        status["containerStatuses"] = [_killed(s, exit_code, now) for s in status.get("containerStatuses") or ()]
        self.store.update(self.pods, {**pod, "status": status}, subresource="status")

    # node faults ---------------------------------------------------------------------------------------------------
    def _node_lost(self, event: FaultEvent, number: int, trigger: dict[str, Any] | None) -> None:
        pod = target_pod(event, self.seed, number, trigger, self._running()) if trigger or event.pod else None
        name = target_node(event, self.seed, number, pod, self._pools())
        node = self.store.find(self.nodes, None, name) if name else None
        if node is None:
            self._missed(event, "node")
            return
        now = now_seconds()
        taints = [t for t in (node.get("spec") or {}).get("taints") or () if t.get("key") != UNREACHABLE]
        taints += [{"key": UNREACHABLE, "effect": effect, "timeAdded": now} for effect in ("NoSchedule", "NoExecute")]
        node = self.store.update(self.nodes, {**node, "spec": {**(node.get("spec") or {}), "taints": taints}})
        kubelet_hooks(self.store).lost_nodes.add(node["metadata"]["name"])
        conditions = [dict(c, status="Unknown", reason="NodeStatusUnknown", lastTransitionTime=now,
                           message="Kubelet stopped posting node status.") for c in node["status"].get("conditions")
                      or ()]
        node = self.store.update(self.nodes, {**node, "status": {**node["status"], "conditions": conditions}},
                                 subresource="status")
        self.store.record_event(node, "NodeNotReady", f"Node {name} status is now: NodeNotReady",
                                source="node-controller")
        for victim in self._running():
            if victim["spec"]["nodeName"] == name:
                seconds = toleration_seconds(victim, event.toleration_s)
                if seconds != float("inf"):
                    key = ("evict", victim["metadata"].get("namespace") or "", victim["metadata"]["name"], name)
                    self.enqueue_after(seconds, key)

    def _evict_from_lost_node(self, namespace: str, name: str, node: str) -> None:
        pod = self.store.find(self.pods, namespace, name)
        if pod is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        message = f"Node {node} which was running pod {name} is unresponsive"
        self.store.record_event(pod, "TaintManagerEviction", f"Marking for deletion Pod {namespace}/{name}",
                                source="taint-eviction-controller")
        self._fail_pod(pod, "NodeLost", message, disruption("DeletionByTaintManager",
                                                            "Taint manager: deleting due to NoExecute taint",
                                                            now_seconds()))


def _killed(status: dict[str, Any], exit_code: int, now: str) -> dict[str, Any]:
    running = (status.get("state") or {}).get("running")
    if running is None:
        return {**status, "ready": False}
    terminated = {"exitCode": exit_code, "reason": "Error", "startedAt": running.get("startedAt") or now,
                  "finishedAt": now, "containerID": status.get("containerID") or ""}
    return {**status, "state": {"terminated": terminated}, "ready": False, "started": False}
