"""Node lifecycle: creates the profile's node pools, marks nodes Ready after the profile's delay, keeps the pools'
NotReady nodes NotReady (with the not-ready taint) and turns nodes NotReady when a node fault fires.

Each node has its kubelet's Lease in ``kube-node-lease`` (owned by the node). It is renewed when the node's Ready
condition is written, not every 10 s as a kubelet does: thousands of simulated nodes would otherwise flood the
store with heartbeats nobody reads."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

from pytest_topsail.sim.controllers.base import BATCH, Controller, now_rfc3339, now_seconds, stable_fraction
from pytest_topsail.sim.controllers.nodeobjects import NOT_READY_TAINT, POOL_LABEL, node_conditions, node_object
from pytest_topsail.sim.controllers.profile import NodeFault

LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40


class NodeController(Controller):
    name = "nodes"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.nodes = self.store.resource_type("nodes")
        self.leases = self.store.resource_type("leases", "coordination.k8s.io")
        self.not_ready: set[str] = set()  # nodes that must stay (or have turned) NotReady

    async def on_start(self) -> None:
        ready_stage = self.profile.nodes.ready
        ready_at_once = ready_stage.delay_ms == 0 and ready_stage.jitter_ms == 0
        created = 0
        gpu_operator = self.profile.preinstalls("gpu_operator")  # else GPUs are advertised by gpuoperator.py
        for pool_index, pool in enumerate(self.profile.node_pools):
            for index in range(pool.count):
                node = node_object(pool, pool_index, index, gpu_operator)
                name = node["metadata"]["name"]
                if index >= pool.count - pool.not_ready:
                    self.not_ready.add(name)
                if self.store.find(self.nodes, None, name) is not None:
                    self.enqueue(name)
                    continue
                if ready_at_once and name not in self.not_ready:
                    node["status"]["conditions"] = node_conditions(ready=True, now=now_seconds())
                    self._renew_lease(self.store.create(self.nodes, node))
                else:
                    self._renew_lease(self.store.create(self.nodes, node))
                    self.enqueue_after(self.delay(ready_stage, name, "ready"), name)
                created += 1
                if created % BATCH == 0:
                    await asyncio.sleep(0)
        for number, fault in enumerate(self.profile.faults.nodes):
            self.call_later(fault.after_ms / 1000.0, ("fault", number), self._fire_fault, fault, number)

    def _fire_fault(self, fault: NodeFault, number: int) -> None:
        pools = [p.name for p in self.profile.node_pools if fault.pool in (None, p.name)]
        selector = {POOL_LABEL: pools[0]} if len(pools) == 1 else None
        candidates = [
            n for n in self.store.list(self.nodes, label_selector=selector)
            if n["metadata"]["labels"].get(POOL_LABEL) in pools and n["metadata"]["name"] not in self.not_ready
        ]
        candidates.sort(key=lambda n: stable_fraction(self.seed, "node-fault", number, n["metadata"]["name"]))
        for node in candidates[: fault.count]:
            self.not_ready.add(node["metadata"]["name"])
            self.enqueue(node["metadata"]["name"])

    async def reconcile(self, key: Hashable) -> None:
        name = str(key)
        node = self.store.find(self.nodes, None, name)
        if node is None:
            return
        ready = name not in self.not_ready
        taints = [t for t in node.get("spec", {}).get("taints") or () if t.get("key") != NOT_READY_TAINT["key"]]
        if not ready:
            taints.append(dict(NOT_READY_TAINT, timeAdded=now_seconds()))
        if taints != list(node.get("spec", {}).get("taints") or ()):
            spec = {k: v for k, v in node.get("spec", {}).items() if k != "taints"}
            if taints:
                spec["taints"] = taints
            node = self.store.update(self.nodes, {**node, "spec": spec})
        current = next((c for c in node["status"].get("conditions") or () if c.get("type") == "Ready"), None)
        if current is not None and current.get("status") == ("True" if ready else "False") and \
                current.get("lastHeartbeatTime"):
            return
        status = {**node["status"], "conditions": node_conditions(ready=ready, now=now_seconds())}
        self._renew_lease(self.store.update(self.nodes, {**node, "status": status}, subresource="status"))

    def _renew_lease(self, node: dict[str, Any]) -> None:
        """The node's kubelet Lease (kubectl describe node reads it), created or renewed now."""
        name = node["metadata"]["name"]
        lease = self.store.find(self.leases, LEASE_NAMESPACE, name)
        spec = {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": now_rfc3339()}
        if lease is None:
            owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
            self.store.create(self.leases, {"metadata": {"name": name, "ownerReferences": [owner]}, "spec": spec},
                              LEASE_NAMESPACE)
        else:
            self.store.update(self.leases, {**lease, "spec": {**(lease.get("spec") or {}), **spec}})
