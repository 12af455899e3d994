"""Which cluster fault ended a pod, from what the cluster shows of it (docs/reliability.md "Fault catalogue").

`pod_fault(pod, events)` reads the pod's `DisruptionTarget` condition and status reason (node_lost: the node became
unreachable and the taint manager evicted the pod; evicted: the kubelet evicted it under node pressure; preempted:
the scheduler preempted it for a higher-priority pod) and the Warning Events about it that name a GPU fault
(`XidError`: gpu_xid, `GPULost`: gpu_lost; on a real cluster a GPU health monitor such as Node Problem Detector with
an Xid rule writes them, the simulator's fault injector does). None when nothing says the cluster ended the pod:
the suite's own taxonomy (OOMKilled, image pull, exit code, ...) applies. Pure: the caller lists the events.
`cluster_fault(kube, namespace, pod)` reads them from the cluster (one pod GET, one Event list).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_topsail.kube.client import KubeError, ObjectRef
from pytest_topsail.kube.events import events_for

if TYPE_CHECKING:
    from pytest_topsail.kube.client import Kube

GPU_EVENTS = {"XidError": "gpu_xid", "GPULost": "gpu_lost"}
DISRUPTIONS = {"DeletionByTaintManager": "node_lost", "TerminationByKubelet": "evicted",
               "PreemptionByScheduler": "preempted", "EvictionByEvictionAPI": "evicted"}
KINDS = ("gpu_xid", "gpu_lost", "node_lost", "evicted", "preempted")


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
        return None
    said = status.get("message") or (disruption or {}).get("message") or reason
    if kind == "preempted":
        said = next((e.get("message") for e in reversed(about) if e.get("reason") == "Preempted"), None) or said
    return ClusterFault(kind, f"pod {name} on node {node}: {said}")


def cluster_fault(kube: Kube, namespace: str, pod: str) -> ClusterFault | None:
    """`pod_fault` of the pod as the cluster has it now; None without a fault, when the pod is gone or the cluster
    does not answer (the caller's own checks go on)."""
    ref = ObjectRef("v1", "Pod", pod, namespace)
    try:
        found = kube.get(ref)
        return pod_fault(found, events_for(kube, ref)) if found is not None else None
    except KubeError:
        return None
