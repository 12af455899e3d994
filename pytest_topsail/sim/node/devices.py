"""The GPUs of the simulated nodes as the NVIDIA device plugin and DCGM see them: which running pod holds which GPU,
which GPUs the device plugin withdrew, and each GPU's last Xid and ECC error counters.

One registry per cluster store, ``devices(store)``. ``holders(pods, gpus)`` gives each running GPU pod its GPUs
(per node, lowest free index first, kept while the pod runs; withdrawn GPUs are given to no new pod): the metric
exporters (exporters.py) and the fault injector (controllers/faults.py) read the same assignment. ``record_xid``,
``record_ecc`` and ``withdraw`` are what a GPU fault changes; ``health(node, index)`` is what DCGM reports of it.
Nothing is recorded without an injected fault: healthy GPUs read 0 errors.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_topsail.sim.machinery.per_store import PerStore

# Xids of application errors (a bad kernel, an MMU fault of the process): the device plugin keeps the GPU healthy
# (its default skip list); every other Xid marks the GPU unhealthy, which withdraws it from the node's allocatable.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
XID_MEANINGS = {
    13: "graphics engine exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
    45: "preemptive cleanup, due to previous errors", 48: "double bit ECC error", 63: "ECC page retirement",
    64: "ECC page retirement or row remapping failure", 74: "NVLink error", 79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate", 94: "contained ECC error", 95: "uncontained ECC error",
    119: "GSP RPC timeout", 120: "GSP error",
}
ECC_XID = 48  # what an uncorrectable (double-bit) ECC error raises
GPU_RESOURCE = "nvidia.com/gpu"


def xid_text(xid: int) -> str:
    meaning = XID_MEANINGS.get(xid)
    return f"Xid {xid}" + (f" ({meaning})" if meaning else "")


@dataclass
class GpuHealth:
    """What DCGM reports of one GPU."""

    xid: int = 0  # DCGM_FI_DEV_XID_ERRORS: the last Xid, 0 for none
    ecc_sbe: int = 0  # DCGM_FI_DEV_ECC_SBE_VOL_TOTAL: single-bit (corrected) errors
    ecc_dbe: int = 0  # DCGM_FI_DEV_ECC_DBE_VOL_TOTAL: double-bit (uncorrectable) errors
    withdrawn: str = ""  # why the device plugin withdrew it ("" while it is allocatable)


@dataclass
class Devices:
    """The registry of one simulated cluster."""

    assigned: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)  # pod uid -> (node, indices)
    health_of: dict[tuple[str, int], GpuHealth] = field(default_factory=dict)

    def health(self, node: str, index: int) -> GpuHealth:
        return self.health_of.get((node, index)) or GpuHealth()

    def _health(self, node: str, index: int) -> GpuHealth:
        return self.health_of.setdefault((node, index), GpuHealth())

    def record_xid(self, node: str, index: int, xid: int) -> bool:
        """Record an Xid; True when the device plugin withdraws the GPU for it (not an application error)."""
        health = self._health(node, index)
        health.xid = xid
        if xid in APPLICATION_XIDS or health.withdrawn:
            return False
        health.withdrawn = xid_text(xid)
        return True

    def lose(self, node: str, index: int) -> None:
        """The GPU fell off the bus: Xid 79, withdrawn whatever the device plugin's skip list."""
        health = self._health(node, index)
        health.xid = 79
        health.withdrawn = health.withdrawn or xid_text(79)

    def record_ecc(self, node: str, index: int, errors: int, uncorrectable: bool) -> bool:
        """Count ECC errors; an uncorrectable one raises Xid 48 (True when that withdraws the GPU)."""
        health = self._health(node, index)
        if not uncorrectable:
            health.ecc_sbe += errors
            return False
        health.ecc_dbe += errors
        return self.record_xid(node, index, ECC_XID)

    def withdrawn(self, node: str) -> int:
        return sum(1 for (name, _), health in self.health_of.items() if name == node and health.withdrawn)

    def holders(self, pods: Iterable[dict[str, Any]], gpus: dict[str, int]) -> dict[tuple[str, int], dict[str, Any]]:
        """(node, GPU index) -> the running pod holding it, for `pods` (the running pods) on nodes of `gpus` (name ->
        GPU count); a pod keeps its GPUs while it runs, new pods get the lowest free healthy indices."""
        running = {pod["metadata"]["uid"]: pod for pod in pods if gpus_requested(pod)}
        self.assigned = {uid: held for uid, held in self.assigned.items() if uid in running}
        taken = {(node, index) for node, indices in self.assigned.values() for index in indices}
        order = sorted(running.values(), key=lambda p: (p["metadata"].get("creationTimestamp", ""),
                                                         p["metadata"]["name"]))
        for pod in order:
            uid, node = pod["metadata"]["uid"], pod["spec"]["nodeName"]
            if uid in self.assigned:
                continue
            free = [index for index in range(gpus.get(node, 0))
                    if (node, index) not in taken and not self.health(node, index).withdrawn]
            indices = tuple(free[:gpus_requested(pod)])
            self.assigned[uid] = (node, indices)
            taken.update((node, index) for index in indices)
        return {(node, index): running[uid] for uid, (node, indices) in self.assigned.items() for index in indices}


def gpus_requested(pod: dict[str, Any]) -> int:
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or ():
        resources = container.get("resources") or {}
        amount = (resources.get("limits") or {}).get("nvidia.com/gpu") or (
            resources.get("requests") or {}).get("nvidia.com/gpu")
        try:
            total += int(float(amount or 0))
        except (TypeError, ValueError):
            continue
    return total


def gpu_count(node: dict[str, Any]) -> int:
    """The node's GPU capacity (what its GPUs are numbered by)."""
    try:
        return int(float(((node.get("status") or {}).get("capacity") or {}).get("nvidia.com/gpu") or 0))
    except (TypeError, ValueError):
        return 0


def advertised_status(node: dict[str, Any], gpus: int, registry: Devices) -> dict[str, Any] | None:
    """The one computation of what a node advertises (the device plugin's registration with its kubelet): the node's
    status with capacity nvidia.com/gpu = `gpus` (its GPUs, 0 while no device plugin runs) and allocatable = those
    the device plugin has not withdrawn; None when that is the status already."""
    status = dict(node.get("status") or {})
    capacity = dict(status.get("capacity") or {})
    allocatable = dict(status.get("allocatable") or {})
    name = (node.get("metadata") or {}).get("name") or ""
    if gpus > 0:
        capacity[GPU_RESOURCE] = str(gpus)
        allocatable[GPU_RESOURCE] = str(max(0, gpus - registry.withdrawn(name)))
    else:
        capacity.pop(GPU_RESOURCE, None)
        allocatable.pop(GPU_RESOURCE, None)
    if capacity == status.get("capacity") and allocatable == status.get("allocatable"):
        return None
    return {**status, "capacity": capacity, "allocatable": allocatable}


devices = PerStore(Devices)  # devices(store): the registry of the cluster `store` belongs to
