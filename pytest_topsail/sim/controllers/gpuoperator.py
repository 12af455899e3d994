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
leaves them alone. Either way it writes the ClusterPolicy's status, once per burst of changes (not per node: a
thousand nodes change at once): `notReady` (Ready False, OperandNotReady, naming the GPU nodes that do not advertise
yet: labelled nvidia.com/gpu.present=true, or carrying NFD's NVIDIA PCI label the operator has not handled yet, or
not Ready), then `ready` once none is left and the operators' `ready_ms` has passed since it first could be (Ready
True, reason Reconciled, or NoGPUNodes when there is no GPU node at all, as the real operator).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any

from pytest_topsail.sim.controllers.base import condition, now_seconds
from pytest_topsail.sim.controllers.nodeobjects import (
    GPU_PRESENT_LABEL,
    GPU_RESOURCE,
    NFD_GPU_LABEL,
    NFD_GPU_LABELS,
    gfd_labels,
    has_gpus,
    nfd_labels,
    operator_labels,
    pool_of,
)
from pytest_topsail.sim.controllers.olm import OperatorController
from pytest_topsail.sim.controllers.profile import NodePool
from pytest_topsail.sim.controllers.stages import advertises
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
READY_MESSAGE = "all GPU nodes advertise nvidia.com/gpu"
NO_GPU_MESSAGE = "No GPU node found, watching for new nodes to join the cluster."


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


def policy_status(policy: dict[str, Any], ready: bool, reason: str, message: str) -> dict[str, Any]:
    """The ClusterPolicy's status (state ready | notReady, conditions Ready and Error)."""
    now = now_seconds()
    error_reason = "Ready" if ready else reason
    return {"state": "ready" if ready else "notReady", "namespace": operand_namespace(policy),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": reason,
                            "message": message, "lastTransitionTime": now},
                           {"type": "Error", "status": "False", "reason": error_reason, "message": "",
                            "lastTransitionTime": now}]}


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
        self.preinstalled = self.profile.preinstalls("gpu_operator")  # nodes born labelled and advertising
        self.ready_elapsed: set[str] = set()  # ClusterPolicy uids whose ready_ms is over
        self._operators: tuple[bool, dict[str, Any] | None] | None = None  # NFD available, policy: this batch's
        self._policy_specs: dict[str, tuple[Any, bool]] = {}  # uid -> (generation, being deleted)
        self.watch_key(NFD_KEY, self._everything)
        self.watch_key(POLICY_KEY, self._policy_changed)
        self.watch_key(("", "nodes"), self._node_changed)
        self.watch_key(("", "pods"), self._pod_changed)
        self._enqueue_all()

    def _everything(self, event_type: str, obj: dict[str, Any]) -> None:
        self._operators = None
        if event_type == "DELETED":
            self.ready_elapsed.discard(obj["metadata"].get("uid") or "")
        self._enqueue_all()

    def _policy_changed(self, event_type: str, policy: dict[str, Any]) -> None:
        """All nodes again when a ClusterPolicy comes, goes or changes its spec; its own status writes change
        nothing for the nodes."""
        meta = policy["metadata"]
        spec = (meta.get("generation"), bool(meta.get("deletionTimestamp")))
        if event_type == "DELETED":
            self._policy_specs.pop(meta["uid"], None)
        elif self._policy_specs.get(meta["uid"]) == spec:
            return
        else:
            self._policy_specs[meta["uid"]] = spec
        self._everything(event_type, policy)

    def _enqueue_all(self) -> None:
        for node in self.store.list(self.nodes):
            self.enqueue(node["metadata"]["name"])
        self.enqueue(POLICY_KEY)  # also without any node: the policy is then ready with NoGPUNodes

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

    def _operators_now(self) -> tuple[bool, dict[str, Any] | None]:
        """(an NFD is Available, the ClusterPolicy), looked up once per batch of nodes."""
        if self._operators is None:
            self._operators = (self._nfd_available(), self._policy())
        return self._operators

    async def reconcile(self, key: Hashable) -> None:
        if key == POLICY_KEY or self.preinstalled:
            return  # the ClusterPolicy's status is written after the batch
        name = str(key)
        node = self.store.find(self.nodes, None, name)
        pool = pool_of(self.profile.node_pools, node) if node is not None else None
        if node is None or pool is None:
            return
        labels = dict(node["metadata"].get("labels") or {})
        managed = managed_label_keys(pool)
        wanted = {k: v for k, v in labels.items() if k not in managed}
        nfd, policy = self._operators_now()
        if nfd:
            wanted.update(nfd_labels(pool))
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

    # the ClusterPolicy's status --------------------------------------------------------------------------------
    async def after_batch(self) -> None:
        self._operators = None
        policy = self._policy()
        if policy is None:
            return
        try:
            self._write_policy_status(policy)
        except ApiError as exc:  # changed or deleted meanwhile: look again (a 404 ends it)
            if exc.code == 409:
                self.enqueue(POLICY_KEY)
            elif exc.code != 404:
                log.warning("sim %s: ClusterPolicy %s: %s", self.name, policy["metadata"]["name"], exc.message)

    def _waiting(self) -> list[str]:
        """The GPU nodes that do not advertise nvidia.com/gpu yet (or are not Ready)."""
        present = self.store.list(self.nodes, label_selector=f"{GPU_PRESENT_LABEL}=true")
        unhandled = self.store.list(self.nodes, label_selector=f"{NFD_GPU_LABEL}=true,!{GPU_PRESENT_LABEL}")
        return [n["metadata"]["name"] for n in present if not advertises(n, GPU_RESOURCE)] + \
            [n["metadata"]["name"] for n in unhandled]

    def _write_policy_status(self, policy: dict[str, Any]) -> None:
        status = policy.get("status") or {}
        waiting = self._waiting()
        uid = policy["metadata"]["uid"]
        if waiting or not status:
            message = (f"waiting for {len(waiting)} GPU node(s) to advertise nvidia.com/gpu: "
                       f"{', '.join(waiting[:5])}" if waiting else
                       "deploying the driver, container toolkit, device plugin and GPU feature discovery")
            if status.get("state") != "notReady" or (condition(policy, "Ready") or {}).get("message") != message:
                self.set_status(self.policies, policy, policy_status(policy, False, "OperandNotReady", message))
            if not waiting:
                self.enqueue(POLICY_KEY)  # ready after ready_ms
            return
        found = bool(self.store.list(self.nodes, label_selector=f"{GPU_PRESENT_LABEL}=true"))
        reason, message = ("Reconciled", READY_MESSAGE) if found else ("NoGPUNodes", NO_GPU_MESSAGE)
        if status.get("state") == "ready" and (condition(policy, "Ready") or {}).get("reason") == reason:
            return
        if uid not in self.ready_elapsed:
            if not self.has_timer(("ready", uid)):
                self.call_later(self.behaviour().ready_ms / 1000.0, ("ready", uid), self._ready_elapsed, uid)
            return
        self.set_status(self.policies, policy, policy_status(policy, True, reason, message))
        self.store.record_event(policy, "Ready", message, source="gpu-operator")

    def _ready_elapsed(self, uid: str) -> None:
        self.ready_elapsed.add(uid)
        self.enqueue(POLICY_KEY)

    @property
    def policies(self) -> Any:
        return self.store.resource_type(POLICY_KEY[1], POLICY_KEY[0])

    def _ensure_namespace(self, namespace: str) -> None:
        if self.store.find(self.namespaces, None, namespace) is None:
            self.store.create(self.namespaces, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": namespace, "labels": {"openshift.io/cluster-monitoring": "true"}}})

