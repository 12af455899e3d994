"""Node objects built from the profile's node pools, in the style of fake-gpu-operator (pure functions), and the
labels the operators of a real cluster put on them (docs/simulator-profile.md "Fresh cluster").

A GPU node is born with its hardware known to the simulator (its pool's GPU profile and count, `pool_of`) but, unless
the profile preinstalls the GPU operator, without any `nvidia.com/*` label or resource: NFD adds `nfd_labels`, the GPU
operator `operator_labels`, GPU feature discovery `gfd_labels` once the device plugin runs (controllers/gpuoperator.py).
"""

from __future__ import annotations

from typing import Any

from pytest_topsail.hardware import sanitize_label_value
from pytest_topsail.sim.controllers.profile import NodePool
from pytest_topsail.sim.node.devices import GPU_RESOURCE

POOL_LABEL = "sim.topsail.io/node-pool"
FAKE_GPU_POOL_LABEL = "run.ai/simulated-gpu-node-pool"
KUBELET_VERSION = "v1.32.0-sim"
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
NFD_GPU_LABEL = "feature.node.kubernetes.io/pci-10de.present"  # NVIDIA's PCI vendor id (display class)
# what the GPU operator accepts as an NVIDIA GPU node besides the vendor label (NFD's class_vendor labels)
NFD_GPU_LABELS = (NFD_GPU_LABEL, "feature.node.kubernetes.io/pci-0302_10de.present",
                  "feature.node.kubernetes.io/pci-0300_10de.present")
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
KERNEL_VERSION = "5.14.0-427.50.1.el9_4.x86_64"
# the operands the GPU operator labels a GPU node for (nvidia.com/gpu.deploy.<operand>=true)
OPERANDS = ("driver", "container-toolkit", "operator-validator", "device-plugin", "dcgm", "dcgm-exporter",
            "gpu-feature-discovery", "node-status-exporter")
# GPU feature discovery's family and compute capability of each GPU profile
ARCHITECTURE = {"a100": ("ampere", "8", "0"), "a100-80gb": ("ampere", "8", "0"), "h100": ("hopper", "9", "0"),
                "b200": ("blackwell", "10", "0"), "l40s": ("ada-lovelace", "8", "9"), "t4": ("turing", "7", "5")}
CUDA_DRIVER = ("550", "127", "05")
CUDA_RUNTIME = ("12", "4")


def node_name(pool: NodePool, index: int) -> str:
    return f"{pool.name}-{index:04d}" if pool.count < 10_000 else f"{pool.name}-{index:06d}"


def node_address(pool_index: int, index: int) -> str:
    """A stable InternalIP per node: 10.<pool>.<index high>.<index low>."""
    return f"10.{(pool_index % 200) + 1}.{(index >> 8) & 255}.{index & 255}"


def has_gpus(pool: NodePool) -> bool:
    return pool.gpu.has_gpus and pool.gpu_count > 0


def pool_of(pools: list[NodePool], node: dict[str, Any]) -> NodePool | None:
    """The pool a node was made from (its hardware), by its pool label."""
    name = ((node.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL)
    return next((pool for pool in pools if pool.name == name), None)


def nfd_labels(pool: NodePool) -> dict[str, str]:
    """What NFD's worker labels the node with: the OS and kernel, and NVIDIA's PCI vendor on a GPU node."""
    labels = {"feature.node.kubernetes.io/system-os_release.ID": "rhcos",
              "feature.node.kubernetes.io/system-os_release.VERSION_ID": "4.17",
              "feature.node.kubernetes.io/kernel-version.full": KERNEL_VERSION}
    if has_gpus(pool):
        labels[NFD_GPU_LABEL] = "true"
    return labels


def operator_labels() -> dict[str, str]:
    """What the GPU operator labels an NFD-labelled GPU node with (its DaemonSets select on them)."""
    return {GPU_PRESENT_LABEL: "true", **{f"nvidia.com/gpu.deploy.{operand}": "true" for operand in OPERANDS}}


def gfd_labels(pool: NodePool) -> dict[str, str]:
    """GPU feature discovery's labels of the node's GPUs (MIG strategy none)."""
    gpu = pool.gpu
    family, major, minor = ARCHITECTURE.get(gpu.name, ("", "", ""))
    labels = {
        "nvidia.com/gpu.product": sanitize_label_value(gpu.product),
        "nvidia.com/gpu.memory": str(gpu.gpu_memory_mib),
        "nvidia.com/gpu.count": str(pool.gpu_count),
        "nvidia.com/mig.strategy": "none",
        "nvidia.com/gpu.family": family,
        "nvidia.com/gpu.compute.major": major,
        "nvidia.com/gpu.compute.minor": minor,
        "nvidia.com/cuda.driver.major": CUDA_DRIVER[0],
        "nvidia.com/cuda.driver.minor": CUDA_DRIVER[1],
        "nvidia.com/cuda.driver.rev": CUDA_DRIVER[2],
        "nvidia.com/cuda.runtime.major": CUDA_RUNTIME[0],
        "nvidia.com/cuda.runtime.minor": CUDA_RUNTIME[1],
    }
    return {key: value for key, value in labels.items() if value}


def node_labels(pool: NodePool, name: str, gpu_operator: bool = True) -> dict[str, str]:
    """The labels of a new node; `gpu_operator` False: a fresh cluster's node (no NFD or NVIDIA label)."""
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node-role.kubernetes.io/worker": "",
        POOL_LABEL: pool.name,
        "type": "kwok",
    }
    gpu = pool.gpu
    if gpu_operator and has_gpus(pool):
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


def node_resources(pool: NodePool, gpu_operator: bool = True) -> dict[str, str]:
    """Capacity (= allocatable) of a new node; nvidia.com/gpu only once the device plugin advertises it."""
    resources = {
        "cpu": pool.node_cpu,
        "memory": pool.node_memory,
        "pods": str(pool.pods),
        "ephemeral-storage": "500Gi",
    }
    if gpu_operator and has_gpus(pool):
        resources[GPU_RESOURCE] = str(pool.gpu_count)
    return resources


def node_object(pool: NodePool, pool_index: int, index: int, gpu_operator: bool = True) -> dict[str, Any]:
    """A node as created: not Ready yet (the node controller marks it Ready after the profile's delay);
    `gpu_operator` False: as on a fresh cluster, its GPUs neither labelled nor advertised."""
    name = node_name(pool, index)
    taints = [t.model_dump(exclude_defaults=False) for t in pool.taints]
    spec: dict[str, Any] = {"providerID": f"sim://{name}"}
    if taints:
        spec["taints"] = taints
    resources = node_resources(pool, gpu_operator)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": node_labels(pool, name, gpu_operator),
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
