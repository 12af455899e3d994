"""Facts of a cluster (Kubernetes/OpenShift versions, nodes, GPU pools): written to the cluster step directory and
turned into KPI labels of the items that use the cluster."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from pytest_topsail.kube.client import Kube, KubeError, ObjectRef

GPU_LABELS = ("nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.memory")


def record_facts(kube: Kube, directory: Path, mode: str) -> dict[str, Any]:
    facts = cluster_facts(kube)
    (directory / "facts.yaml").write_text(yaml.safe_dump(facts, sort_keys=False), encoding="utf-8")
    (directory / "server.txt").write_text(kube.description + "\n", encoding="utf-8")
    return facts


def cluster_facts(kube: Kube) -> dict[str, Any]:
    """Kubernetes and OpenShift versions, node count and GPU pools (product, GPUs per node, GPU memory)."""
    version = kube.version() or {}
    facts: dict[str, Any] = {"kubernetes_version": version.get("gitVersion", "unknown"), "openshift_version": None}
    try:
        facts["openshift_version"] = _openshift_version(kube)
    except KubeError:
        facts["openshift_version"] = None
    nodes = kube.list("v1", "Node")
    facts["node_count"] = len(nodes)
    pools: Counter[tuple[str, int, int]] = Counter()
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        product = labels.get(GPU_LABELS[0])
        if product:
            pools[(product, _int(labels.get(GPU_LABELS[1])), _int(labels.get(GPU_LABELS[2])))] += 1
    facts["gpu_pools"] = [{"gpu_product": product, "gpus_per_node": count, "gpu_memory_mib": memory, "nodes": n}
                          for (product, count, memory), n in pools.most_common()]
    return facts


def _openshift_version(kube: Kube) -> str | None:


    if not kube.has_kind("config.openshift.io/v1", "ClusterVersion"):
        return None
    obj = kube.get(ObjectRef("config.openshift.io/v1", "ClusterVersion", "version")) or {}
    desired = (obj.get("status") or {}).get("desired") or {}
    return desired.get("version")


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def fact_labels(mode: str, facts: dict[str, Any]) -> dict[str, Any]:
    """KPI labels: cluster kind, versions, node count, and the largest GPU pool (all pools in `gpu_pools`)."""
    labels: dict[str, Any] = {"cluster": mode, "kubernetes_version": facts.get("kubernetes_version"),
                              "node_count": facts.get("node_count")}
    if facts.get("openshift_version"):
        labels["openshift_version"] = facts["openshift_version"]
    pools = facts.get("gpu_pools") or []
    if pools:
        labels.update(gpu_product=pools[0]["gpu_product"], gpus_per_node=pools[0]["gpus_per_node"],
                      gpu_memory_mib=pools[0]["gpu_memory_mib"], gpu_nodes=sum(p["nodes"] for p in pools))
        labels["gpu_pools"] = "; ".join(f"{p['nodes']} x {p['gpus_per_node']} {p['gpu_product']} "
                                        f"({p['gpu_memory_mib']} MiB)" for p in pools)
    return labels
