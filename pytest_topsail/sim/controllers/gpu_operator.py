"""The NFD and NVIDIA GPU operators, simulated: their custom resources become ready like the real ones.

- NodeFeatureDiscovery (nfd.openshift.io/v1): condition Available=True after the behaviour's `ready_ms`.
- ClusterPolicy (nvidia.com/v1): `status.state` "notReady" until every GPU node (label nvidia.com/gpu.present=true)
  is Ready and advertises allocatable nvidia.com/gpu, then "ready" (plus a Ready condition), re-evaluated when
  nodes change. The kinds exist only once OLM installed the operators (see olm.py).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, cast

from pytest_topsail.sim.controllers.olm import OperatorController, condition

NFD_GROUP = "nfd.openshift.io"
NVIDIA_GROUP = "nvidia.com"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"


class GpuOperatorController(OperatorController):
    name = "gpu-operator"

    async def on_start(self) -> None:
        self.nodes = self.store.resource_type("nodes")
        self.listen(NFD_GROUP, "nodefeaturediscoveries", self.enqueue_on("nfd"))
        self.listen(NVIDIA_GROUP, "clusterpolicies", self.enqueue_on("clusterpolicy"))
        self.watch("nodes", "", self._node_changed)

    def _node_changed(self, event_type: str, node: dict[str, Any]) -> None:
        policies = self.type_of(NVIDIA_GROUP, "clusterpolicies")
        if policies is None:
            return
        for policy in self.store.list(policies):
            self.enqueue(("clusterpolicy", "", policy["metadata"]["name"]))

    async def reconcile(self, key: Hashable) -> None:
        kind, namespace, name = cast(tuple[str, str, str], key)
        if kind == "nfd":
            self._reconcile_nfd(namespace, name)
        elif kind == "clusterpolicy":
            self._reconcile_clusterpolicy(name)

    def _reconcile_nfd(self, namespace: str, name: str) -> None:
        rtype = self.type_of(NFD_GROUP, "nodefeaturediscoveries")
        obj = self.store.find(rtype, namespace, name) if rtype else None
        if obj is None:
            self.forget(("nfd", namespace, name))
            return
        if not self.ready_delay_over(("nfd", namespace, name), obj):
            if not obj.get("status"):
                self.set_status(rtype, obj, {"conditions": [condition("Available", False, "Progressing",
                                                                       "deploying nfd-master and nfd-worker")]})
            return
        status = {"conditions": [condition("Available", True, "AsExpected", "nfd-master and nfd-worker are running"),
                                 condition("Degraded", False, "AsExpected", "")]}
        if _condition_status(obj, "Available") != "True":
            self.set_status(rtype, obj, status)
            self.store.record_event(obj, "Ready", "node feature discovery is running", source="nfd-operator")

    def _reconcile_clusterpolicy(self, name: str) -> None:
        rtype = self.type_of(NVIDIA_GROUP, "clusterpolicies")
        policy = self.store.find(rtype, None, name) if rtype else None
        key = ("clusterpolicy", "", name)
        if policy is None:
            self.forget(key)
            return
        waiting = self._gpu_nodes_not_advertising()
        delay_over = self.ready_delay_over(key, policy)
        ready = delay_over and not waiting
        if ready:
            message = "all GPU nodes advertise nvidia.com/gpu"
        elif waiting:
            message = f"waiting for {len(waiting)} GPU node(s) to advertise nvidia.com/gpu: {', '.join(waiting[:5])}"
        else:
            message = "deploying the driver, container toolkit, device plugin and GPU feature discovery"
        state = "ready" if ready else "notReady"
        if (policy.get("status") or {}).get("state") == state and \
                _condition_message(policy, "Ready") == message:
            return
        self.set_status(rtype, policy, {
            "state": state,
            "namespace": (policy.get("spec") or {}).get("operator", {}).get("namespace", "nvidia-gpu-operator"),
            "conditions": [condition("Ready", ready, "Reconciled" if ready else "OperandNotReady", message),
                           condition("Error", False, "Ready" if ready else "OperandNotReady", "")],
        })
        if ready:
            self.store.record_event(policy, "Ready", message, source="gpu-operator")

    def _gpu_nodes_not_advertising(self) -> list[str]:
        waiting = []
        for node in self.store.list(self.nodes, label_selector={GPU_PRESENT_LABEL: "true"}):
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            ready = _condition_status(node, "Ready") == "True"
            if not ready or str(allocatable.get("nvidia.com/gpu", "0")) in ("", "0"):
                waiting.append(node["metadata"]["name"])
        return waiting


def _condition_status(obj: dict[str, Any], kind: str) -> str | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind:
            return cond.get("status")
    return None


def _condition_message(obj: dict[str, Any], kind: str) -> str | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind:
            return cond.get("message")
    return None
