"""Which cluster fault ended a pod, from what the cluster shows of it (docs/reliability.md "Fault catalogue").

`pod_fault(pod, events)` reads the pod's `DisruptionTarget` condition and status reason (node_lost: the node became
unreachable and the taint manager evicted the pod; evicted: the kubelet evicted it under node pressure; preempted:
the scheduler preempted it for a higher-priority pod) and the Warning Events about it that name a GPU fault
(`XidError`: gpu_xid, `GPULost`: gpu_lost; on a real cluster a GPU health monitor such as Node Problem Detector with
an Xid rule writes them, the simulator's fault injector does). None when nothing says the cluster ended the pod:
the suite's own taxonomy (OOMKilled, image pull, exit code, ...) applies. A pod still waiting for its containers
with `FailedAttachVolume`/`FailedMount` Warnings about it is volume_attach (its PVC cannot be attached or mounted).
A pod already gone (a ReplicaSet's replaced pod) is named from its Events alone (`Evicted`, `Preempted`,
`TaintManagerEviction`, the GPU Events). Pure: the caller lists the events.
`container_fault(pod)`: oom (a container OOMKilled) and image_pull (waiting in ErrImagePull/ImagePullBackOff), for
suites without their own classes of those (fine-tuning has its own messages).
`cluster_fault(kube, namespace, pod)` reads them from the cluster (one pod GET, one Event list);
`faults_in(kube, namespace, label_selector)` every pod's fault of a namespace (one pod list, one Event list).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_topsail.kube.client import KubeError, ObjectRef
from pytest_topsail.kube.events import events_for, events_in

if TYPE_CHECKING:
    from pytest_topsail.kube.client import Kube

GPU_EVENTS = {"XidError": "gpu_xid", "GPULost": "gpu_lost"}
DISRUPTIONS = {"DeletionByTaintManager": "node_lost", "TerminationByKubelet": "evicted",
               "PreemptionByScheduler": "preempted", "EvictionByEvictionAPI": "evicted"}
EVENT_KINDS = {"Evicted": "evicted", "Preempted": "preempted", "TaintManagerEviction": "node_lost"}
VOLUME_EVENTS = ("FailedAttachVolume", "FailedMount")
IMAGE_PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName")
KINDS = ("gpu_xid", "gpu_lost", "node_lost", "evicted", "preempted", "volume_attach", "image_pull", "oom")


@dataclass(frozen=True)
class ClusterFault:
    kind: str  # one of KINDS
    message: str  # names the fault and the objects (pod, node, GPU)


def pod_fault(pod: dict[str, Any], events: list[dict[str, Any]]) -> ClusterFault | None:
    """The fault that ended `pod`, from its conditions, status and the `events` (any: those about other objects are
    skipped), or None."""
    meta = pod.get("metadata") or {}
    name = meta.get("name") or ""
    node = (pod.get("spec") or {}).get("nodeName") or "?"
    status = pod.get("status") or {}
    about = [e for e in events if (e.get("involvedObject") or {}).get("name") == name
             and (e.get("involvedObject") or {}).get("kind", "Pod") == "Pod"]
    for event in reversed(about):
        kind = GPU_EVENTS.get(str(event.get("reason")))
        if kind is not None:
            said = str(event.get("message") or event.get("reason"))
            return ClusterFault(kind, said if name in said else f"pod {name}: {said}")
    reason = status.get("reason") or ""
    disruption = next((c for c in status.get("conditions") or () if c.get("type") == "DisruptionTarget"
                       and c.get("status") == "True"), None)
    kind = DISRUPTIONS.get(str((disruption or {}).get("reason"))) or {"Evicted": "evicted", "NodeLost": "node_lost",
                                                                     "Preempting": "preempted"}.get(reason)
    if kind is None:
        return _volume_fault(pod, about) or _event_fault(name, node, about)
    said = status.get("message") or (disruption or {}).get("message") or reason
    if kind == "preempted":
        said = next((e.get("message") for e in reversed(about) if e.get("reason") == "Preempted"), None) or said
    return ClusterFault(kind, f"pod {name} on node {node}: {said}")


def _volume_fault(pod: dict[str, Any], about: list[dict[str, Any]]) -> ClusterFault | None:
    """volume_attach: the pod's containers never started and the kubelet or the attach controller says why."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or ()
    if any("waiting" not in (s.get("state") or {"waiting": {}}) for s in statuses):
        return None  # a container started: an attach that was slow, not the cause of an end
    warning = next((e for e in reversed(about) if e.get("reason") in VOLUME_EVENTS), None)
    if warning is None:
        return None
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    claims = [v["persistentVolumeClaim"].get("claimName") for v in spec.get("volumes") or ()
              if v.get("persistentVolumeClaim")]
    what = f" (PVC {', '.join(map(str, claims))})" if claims else ""
    return ClusterFault("volume_attach", f"pod {meta.get('name')} on node {spec.get('nodeName') or '?'}{what}: "
                        f"{warning.get('reason')}: {warning.get('message') or ''}".rstrip())


def _event_fault(name: str, node: str, about: list[dict[str, Any]]) -> ClusterFault | None:
    """A pod whose status no longer says (it is gone, or its kubelet reports nothing more): its Events."""
    event = next((e for e in reversed(about) if e.get("reason") in EVENT_KINDS), None)
    if event is None:
        return None
    kind = EVENT_KINDS[str(event.get("reason"))]
    said = str(event.get("message") or event.get("reason"))
    if kind == "node_lost":
        said = f"{said} (its node did not answer)"
    return ClusterFault(kind, f"pod {name} on node {node}: {said}")


def container_fault(pod: dict[str, Any]) -> ClusterFault | None:
    """oom: a container (now or before its last restart) OOMKilled; image_pull: a container waiting for an image
    that cannot be pulled. None otherwise."""
    name = (pod.get("metadata") or {}).get("name")
    node = (pod.get("spec") or {}).get("nodeName") or "?"
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        state, last = status.get("state") or {}, status.get("lastState") or {}
        ended = state.get("terminated") or last.get("terminated") or {}
        if ended.get("reason") == "OOMKilled":
            return ClusterFault("oom", f"container {status.get('name')} of pod {name} on node {node} was OOMKilled "
                                f"(exit code {ended.get('exitCode', 137)})")
        waiting = state.get("waiting") or {}
        if waiting.get("reason") in IMAGE_PULL_REASONS:
            return ClusterFault("image_pull", f"pod {name} cannot pull image {status.get('image')!r}: "
                                f"{waiting.get('reason')} {waiting.get('message') or ''}".rstrip())
    return None


def faults_in(kube: Kube, namespace: str, label_selector: str | None = None,
              containers: bool = True) -> dict[str, ClusterFault]:
    """Pod name -> the fault that ended it, for the pods of `namespace` (matching `label_selector`) and the pods
    gone since that Events name (`pod_fault`, then `container_fault` unless `containers` is False). Empty when the
    cluster does not answer."""
    try:
        pods = kube.list("v1", "Pod", namespace=namespace, label_selector=label_selector)
        events = events_in(kube, namespace)
    except KubeError:
        return {}
    by_pod: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        if involved.get("kind", "Pod") == "Pod":
            by_pod.setdefault(str(involved.get("name")), []).append(event)
    found: dict[str, ClusterFault] = {}
    for pod in pods:
        name = pod["metadata"]["name"]
        fault = pod_fault(pod, by_pod.get(name, [])) or (container_fault(pod) if containers else None)
        if fault is not None:
            found[name] = fault
    if label_selector is None:  # gone pods cannot be told by their labels
        present = {pod["metadata"]["name"] for pod in pods}
        for name, about in by_pod.items():
            if name not in present:
                fault = pod_fault({"metadata": {"name": name}, "spec": {"nodeName": _node_of(about)}}, about)
                if fault is not None:
                    found[name] = fault
    return found


def _node_of(events: list[dict[str, Any]]) -> str:
    """The node an Event about a pod names (`source.host`, or `... from node X` / `on node X` in its message)."""
    for event in reversed(events):
        host = (event.get("source") or {}).get("host")
        if host:
            return str(host)
        words = str(event.get("message") or "").rstrip(".").split()
        if "node" in words[:-1]:  # the last one: "The node was low on resource: ... Evicted from node X."
            return words[len(words) - 1 - words[::-1].index("node") + 1].rstrip(".:;,")
    return "?"


def cluster_fault(kube: Kube, namespace: str, pod: str) -> ClusterFault | None:
    """`pod_fault` of the pod as the cluster has it now; None without a fault, when the pod is gone or the cluster
    does not answer (the caller's own checks go on)."""
    ref = ObjectRef("v1", "Pod", pod, namespace)
    try:
        found = kube.get(ref)
        return pod_fault(found, events_for(kube, ref)) if found is not None else None
    except KubeError:
        return None
