"""Node objects built from the profile's node pools, in the style of fake-gpu-operator (pure functions)."""

from __future__ import annotations

from typing import Any

from pytest_topsail.hardware import sanitize_label_value
from pytest_topsail.sim.controllers.profile import NodePool

POOL_LABEL = "sim.topsail.io/node-pool"
FAKE_GPU_POOL_LABEL = "run.ai/simulated-gpu-node-pool"
KUBELET_VERSION = "v1.32.0-sim"
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def node_name(pool: NodePool, index: int) -> str:
    return f"{pool.name}-{index:04d}" if pool.count < 10_000 else f"{pool.name}-{index:06d}"


def node_address(pool_index: int, index: int) -> str:
    """A stable InternalIP per node: 10.<pool>.<index high>.<index low>."""
    return f"10.{(pool_index % 200) + 1}.{(index >> 8) & 255}.{index & 255}"


def node_labels(pool: NodePool, name: str) -> dict[str, str]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node-role.kubernetes.io/worker": "",
        POOL_LABEL: pool.name,
        "type": "kwok",
    }
    gpu = pool.gpu
    if gpu.has_gpus and pool.gpu_count > 0:
        labels.update(
            {
                FAKE_GPU_POOL_LABEL: pool.name,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": sanitize_label_value(gpu.product),
                "nvidia.com/gpu.memory": str(gpu.gpu_memory_mib),
                "nvidia.com/gpu.count": str(pool.gpu_count),
                "nvidia.com/mig.strategy": "none",
            }
        )
    labels.update(pool.labels)
    return labels


def node_resources(pool: NodePool) -> dict[str, str]:
    resources = {
        "cpu": pool.node_cpu,
        "memory": pool.node_memory,
        "pods": str(pool.pods),
        "ephemeral-storage": "500Gi",
    }
    if pool.gpu.has_gpus and pool.gpu_count > 0:
        resources["nvidia.com/gpu"] = str(pool.gpu_count)
    return resources


def node_object(pool: NodePool, pool_index: int, index: int) -> dict[str, Any]:
    """A node as created: not Ready yet (the node controller marks it Ready after the profile's delay)."""
    name = node_name(pool, index)
    taints = [t.model_dump(exclude_defaults=False) for t in pool.taints]
    spec: dict[str, Any] = {"providerID": f"sim://{name}"}
    if taints:
        spec["taints"] = taints
    resources = node_resources(pool)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": node_labels(pool, name),
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "addresses": [
                {"type": "InternalIP", "address": node_address(pool_index, index)},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "osImage": "pytest-topsail simulated node",
                "kernelVersion": "6.0.0-sim",
                "containerRuntimeVersion": "sim://1.0",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "conditions": node_conditions(ready=False, now=None),
        },
    }


def node_conditions(*, ready: bool, now: str | None, reason: str | None = None) -> list[dict[str, Any]]:
    """The node conditions a kubelet reports; `now` None leaves the times unset (before the first heartbeat)."""
    times = {"lastHeartbeatTime": now, "lastTransitionTime": now} if now else {}
    pressure = [
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]
    conditions = [{"type": t, "status": "False", "reason": r, "message": m, **times} for t, r, m in pressure]
    if ready:
        conditions.append(
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
             **times}
        )
    else:
        conditions.append(
            {"type": "Ready", "status": "False", "reason": reason or "KubeletNotReady",
             "message": "container runtime network not ready (simulated)", **times}
        )
    return conditions
