"""Benchmark of the simulator's fresh-cluster GPU operator step (not part of the test run).

    python benchmarks/sim_fresh_cluster.py [--nodes 20,1000] [--repeat 3]

For each node count N (a100 GPU nodes, default stage and operator timings: NodeFeatureDiscovery and ClusterPolicy
ready_ms 300 ms, pods initialize 20+0..20 ms and start 50+0..50 ms), every built-in controller started on a Store in
this process, the NFD and GPU operator kinds registered as OLM's InstallPlan does, then a NodeFeatureDiscovery and a
ClusterPolicy created at once: seconds until every node advertises nvidia.com/gpu, and until the ClusterPolicy is
`ready`. Beside it, the same N nodes started with `preinstalled: [gpu_operator]` (born advertising): seconds until all
are Ready, measured in the same run. Medians of --repeat runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from pytest_topsail.sim.controllers import start_controllers
from pytest_topsail.sim.controllers.olm import PACKAGES
from pytest_topsail.sim.controllers.profile import Profile
from pytest_topsail.sim.registry.store import Store

TIMEOUT = 120.0


def _profile(nodes: int, preinstalled: list[str]) -> Profile:
    return Profile.from_dict({"seed": 1, "preinstalled": preinstalled,
                              "node_pools": [{"name": "gpu", "count": nodes, "gpu_profile": "a100"}]})


async def _until(check: Callable[[], bool], what: str) -> float:
    started = time.perf_counter()
    while not check():
        if time.perf_counter() - started > TIMEOUT:
            raise TimeoutError(f"{what}: not within {TIMEOUT} s")
        await asyncio.sleep(0.005)
    return time.perf_counter() - started


def _ready(node: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions") or ())


async def _preinstalled(nodes: int) -> float:
    started = time.perf_counter()
    store = Store(seed=1)
    controllers = await start_controllers(store, _profile(nodes, ["gpu_operator"]))
    node_type = store.resource_type("nodes")
    await _until(lambda: sum(map(_ready, store.list(node_type))) == nodes, "nodes Ready")
    await controllers.stop()
    return time.perf_counter() - started


async def _operator_step(nodes: int) -> tuple[float, float]:
    store = Store(seed=1)
    controllers = await start_controllers(store, _profile(nodes, []))
    node_type = store.resource_type("nodes")
    await _until(lambda: sum(map(_ready, store.list(node_type))) == nodes, "nodes Ready")
    kinds = {crd.plural: store.register_crd(crd.manifest())
             for package in ("nfd", "gpu-operator-certified") for crd in PACKAGES[package].owned}
    store.create(store.resource_type("namespaces"), {"metadata": {"name": "openshift-nfd"}})
    started = time.perf_counter()
    store.create(kinds["nodefeaturediscoveries"], {
        "apiVersion": "nfd.openshift.io/v1", "kind": "NodeFeatureDiscovery",
        "metadata": {"name": "nfd-instance", "namespace": "openshift-nfd"}, "spec": {}})
    store.create(kinds["clusterpolicies"], {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "gpu-cluster-policy"},
        "spec": {c: {} for c in ("operator", "daemonsets", "driver", "toolkit", "devicePlugin", "dcgm",
                                 "dcgmExporter", "nodeStatusExporter", "gfd")}})

    def advertising() -> bool:
        return all((n["status"].get("allocatable") or {}).get("nvidia.com/gpu") == "8" for n in store.list(node_type))

    def policy_ready() -> bool:
        policy = store.find(kinds["clusterpolicies"], None, "gpu-cluster-policy") or {}
        return (policy.get("status") or {}).get("state") == "ready"

    await _until(advertising, "every node advertising")
    advertised = time.perf_counter() - started
    await _until(policy_ready, "ClusterPolicy ready")
    ready = time.perf_counter() - started
    await controllers.stop()
    return advertised, ready


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="20,1000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for nodes in (int(n) for n in args.nodes.split(",")):
        steps, births = [], []
        for _ in range(args.repeat):
            steps.append(asyncio.run(_operator_step(nodes)))
            births.append(asyncio.run(_preinstalled(nodes)))
        advertised = statistics.median(s[0] for s in steps)
        ready = statistics.median(s[1] for s in steps)
        born = statistics.median(births)
        print(f"{nodes:>6} nodes: NFD + ClusterPolicy -> all advertise {advertised:.2f} s, policy ready {ready:.2f} s"
              f" | preinstalled nodes Ready from start {born:.2f} s (ratio step/start {advertised / born:.2f})",
              flush=True)


if __name__ == "__main__":
    main()
