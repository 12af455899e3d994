"""What NFD and the NVIDIA GPU operator do to the nodes of a fresh cluster (docs/simulator-profile.md "Fresh cluster").

Their kinds exist once OLM installed the operators (olm.py); their custom resources' statuses are stages of
operator_stages.yaml. This controller does what their operands do to the nodes, node by node:

- while a NodeFeatureDiscovery is Available, every node carries NFD's OS and kernel labels, and a node whose pool has
  GPUs `feature.node.kubernetes.io/pci-10de.present=true` (NFD's worker; removed again with the last one, as the NFD
  operator's prune does);
- while a ClusterPolicy exists, each node with an NVIDIA PCI label gets `nvidia.com/gpu.present=true` and the
  `nvidia.com/gpu.deploy.<operand>` labels, and one device-plugin pod and one dcgm-exporter pod bound to it (no
  scheduler work) in the operator's namespace (the ClusterPolicy's `spec.operator.namespace`, default
  nvidia-gpu-operator), owned by the ClusterPolicy: deleted with it;
- when a node's device-plugin pod runs, the node advertises its GPUs (capacity and allocatable nvidia.com/gpu,
  `sim.node.devices.advertised_status`: minus the GPUs faults withdrew) and carries GPU feature discovery's labels;
  when the pod goes, the GPUs and the labels go.

With `gpu_operator` in the profile's `preinstalled` the nodes are born labelled and advertising, and this controller
leaves them alone.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any

from pytest_topsail.sim.controllers.base import condition
from pytest_topsail.sim.controllers.nodeobjects import (
    NFD_GPU_LABELS,
    gfd_labels,
    has_gpus,
    nfd_labels,
    operator_labels,
    pool_of,
)
from pytest_topsail.sim.controllers.olm import OperatorController
from pytest_topsail.sim.controllers.profile import NodePool
from pytest_topsail.sim.controllers.workload import suffix
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.node.devices import advertised_status, devices

log = logging.getLogger(__name__)

NFD_KEY = ("nfd.openshift.io", "nodefeaturediscoveries")
POLICY_KEY = ("nvidia.com", "clusterpolicies")
DEFAULT_NAMESPACE = "nvidia-gpu-operator"
DEVICE_PLUGIN = "nvidia-device-plugin-daemonset"
DCGM_EXPORTER = "nvidia-dcgm-exporter"
OPERANDS = {DEVICE_PLUGIN: "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
            DCGM_EXPORTER: "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubi9"}
NODE_LABEL = "sim.topsail.io/operand-node"  # the node an operand pod serves (found without listing pods)


def operand_pod_name(seed: int, app: str, node: str) -> str:
    """`<daemonset>-<5 chars>`, the suffix from the seed and the node (the same pod name in every run)."""
    return f"{app}-{suffix(seed, app, node)}"


def operand_namespace(policy: dict[str, Any]) -> str:
    return str(((policy.get("spec") or {}).get("operator") or {}).get("namespace") or DEFAULT_NAMESPACE)


def operand_pod(app: str, name: str, namespace: str, node: str, policy: dict[str, Any]) -> dict[str, Any]:
    """One operand pod of a DaemonSet of the ClusterPolicy, bound to `node`."""
    meta = policy["metadata"]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app": app, "app.kubernetes.io/part-of": "nvidia-gpu", NODE_LABEL: node},
                     "ownerReferences": [{"apiVersion": policy["apiVersion"], "kind": "ClusterPolicy",
                                          "name": meta["name"], "uid": meta["uid"], "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {"nodeName": node, "restartPolicy": "Always",
                 "containers": [{"name": app.removeprefix("nvidia-").removesuffix("-daemonset"),
                                 "image": OPERANDS[app]}],
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    }


def managed_label_keys(pool: NodePool) -> set[str]:
    """Every label NFD, the GPU operator and GFD may put on a node of `pool` (the pool's own labels excepted)."""
    keys = {*nfd_labels(pool), *NFD_GPU_LABELS, *operator_labels(), *gfd_labels(pool)}
    return keys - set(pool.labels)


class GpuOperatorController(OperatorController):
    name = "gpu-operator"

    async def on_start(self) -> None:
        self.nodes = self.store.resource_type("nodes")
        self.pods = self.store.resource_type("pods")
        self.namespaces = self.store.resource_type("namespaces")
        if self.profile.preinstalls("gpu_operator"):
            return  # the nodes are born labelled and advertising their GPUs
        self.watch_key(NFD_KEY, self._everything)
        self.watch_key(POLICY_KEY, self._everything)
        self.watch_key(("", "nodes"), self._node_changed)
        self.watch_key(("", "pods"), self._pod_changed)
        self._enqueue_all()

    def _everything(self, event_type: str, obj: dict[str, Any]) -> None:
        self._enqueue_all()

    def _enqueue_all(self) -> None:
        for node in self.store.list(self.nodes):
            self.enqueue(node["metadata"]["name"])

    def _node_changed(self, event_type: str, node: dict[str, Any]) -> None:
        if event_type != "DELETED":
            self.enqueue(node["metadata"]["name"])

    def _pod_changed(self, event_type: str, pod: dict[str, Any]) -> None:
        node = (pod["metadata"].get("labels") or {}).get(NODE_LABEL)
        if node:
            self.enqueue(node)

    # the state of the operators: a few objects, read per node
    def _nfd_available(self) -> bool:
        rtype = self.type_of(*NFD_KEY)
        return rtype is not None and any(
            (condition(obj, "Available") or {}).get("status") == "True" and not obj["metadata"].get("deletionTimestamp")
            for obj in self.store.list(rtype))

    def _policy(self) -> dict[str, Any] | None:
        rtype = self.type_of(*POLICY_KEY)
        policies = [p for p in self.store.list(rtype) if not p["metadata"].get("deletionTimestamp")] if rtype else []
        return min(policies, key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]),
                   default=None)

    async def reconcile(self, key: Hashable) -> None:
        name = str(key)
        node = self.store.find(self.nodes, None, name)
        pool = pool_of(self.profile.node_pools, node) if node is not None else None
        if node is None or pool is None:
            return
        labels = dict(node["metadata"].get("labels") or {})
        managed = managed_label_keys(pool)
        wanted = {k: v for k, v in labels.items() if k not in managed}
        if self._nfd_available():
            wanted.update(nfd_labels(pool))
        policy = self._policy()
        advertising = 0
        if policy is not None and any(wanted.get(label) == "true" for label in NFD_GPU_LABELS):
            wanted.update(operator_labels())
            if self._device_plugin_runs(policy, name) and has_gpus(pool):
                wanted.update(gfd_labels(pool))
                advertising = pool.gpu_count
        if wanted != labels:
            node = self.store.update(self.nodes, {**node, "metadata": {**node["metadata"], "labels": wanted}})
        status = advertised_status(node, advertising, devices(self.store))
        if status is not None:
            self.store.update(self.nodes, {**node, "status": status}, subresource="status")

    def _device_plugin_runs(self, policy: dict[str, Any], node: str) -> bool:
        """Whether the node's device-plugin pod runs; its operand pods are created when missing."""
        namespace = operand_namespace(policy)
        running = False
        for app in OPERANDS:
            pod_name = operand_pod_name(self.seed, app, node)
            pod = self.store.find(self.pods, namespace, pod_name)
            if pod is None:
                self._ensure_namespace(namespace)
                try:
                    self.store.create(self.pods, operand_pod(app, pod_name, namespace, node, policy))
                except ApiError as exc:
                    if exc.reason != "AlreadyExists":
                        raise
            elif app == DEVICE_PLUGIN:
                running = (pod.get("status") or {}).get("phase") == "Running" and \
                    not pod["metadata"].get("deletionTimestamp")
        return running

    def _ensure_namespace(self, namespace: str) -> None:
        if self.store.find(self.namespaces, None, namespace) is None:
            self.store.create(self.namespaces, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": namespace, "labels": {"openshift.io/cluster-monitoring": "true"}}})

