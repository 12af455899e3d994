"""Benchmarks of the simulator's controllers (not part of the test run).

    python benchmarks/sim_controllers.py [--nodes 5000] [--pods 10000] [--client]

1. nodes: a profile with N GPU nodes -> time until every node is Ready (goal: 5,000 nodes <= 10 s).
2. pods: P pods created (in-process, or through the official client against the real server with --client)
   -> time until all are Running (goal: 10,000 pods <= 30 s; kwok's CI bar is 60 s with a real apiserver).
Each figure is printed beside the same work done without controllers (the store alone), measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from pytest_topsail.sim.controllers import start_controllers
from pytest_topsail.sim.controllers.nodeobjects import node_object
from pytest_topsail.sim.profile import Profile
from pytest_topsail.sim.store import Store

TIMEOUT = 120.0


def _profile(nodes: int) -> Profile:
    return Profile.from_dict({
        "seed": 1,
        "node_pools": [{"name": "gpu", "count": nodes, "gpu_profile": "a100"}],
        "stages": {"initialize": {"delay_ms": 20, "jitter_ms": 20}, "start": {"delay_ms": 50, "jitter_ms": 50}},
    }, source="benchmark")


def _pod(index: int) -> dict:
    return {"metadata": {"name": f"bench-{index:06d}", "namespace": "bench", "labels": {"app": "bench"}},
            "spec": {"containers": [{"name": "c", "image": "sim", "command": ["sleep", "infinity"],
                                     "resources": {"requests": {"cpu": "50m", "memory": "1Mi", "nvidia.com/gpu": "1"}}}]}}


async def _wait(predicate, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what} after {TIMEOUT:.0f} s")
        await asyncio.sleep(0.05)


async def nodes_ready(count: int) -> tuple[float, float]:
    """(seconds until all nodes Ready with controllers, seconds to store the same node objects without them)."""
    profile = _profile(count)
    store = Store(seed=1)
    nodes = store.resource_type("nodes")
    start = time.perf_counter()
    controllers = await start_controllers(store, profile, ["pytest_topsail.sim.controllers.nodes:NodeController"])

    def all_ready() -> bool:
        items = store.list(nodes)
        return len(items) == count and all(
            c["status"] == "True" for n in items for c in n["status"]["conditions"] if c["type"] == "Ready")

    await _wait(all_ready, f"{count} nodes Ready")
    with_controllers = time.perf_counter() - start
    await controllers.stop()
    baseline_store = Store(seed=1)
    start = time.perf_counter()
    for index in range(count):
        baseline_store.create(baseline_store.resource_type("nodes"), node_object(profile.node_pools[0], 0, index))
    return with_controllers, time.perf_counter() - start


async def pods_running_in_process(nodes: int, count: int) -> tuple[float, float]:
    store = Store(seed=1)
    controllers = await start_controllers(store, _profile(nodes))
    store.create(store.resource_type("namespaces"), {"metadata": {"name": "bench"}})
    pods = store.resource_type("pods")
    running = 0

    def on_event(event_type, rtype, obj):
        nonlocal running
        if rtype.key == ("", "pods") and event_type == "MODIFIED" and obj["status"].get("phase") == "Running":
            old = obj["status"].get("containerStatuses") or []
            if old and "running" in old[0]["state"] and not obj["metadata"].get("annotations", {}).get("_seen"):
                pass
    store.add_listener(on_event)
    start = time.perf_counter()
    for index in range(count):
        store.create(pods, _pod(index))
        if index % 200 == 0:
            await asyncio.sleep(0)
    await _wait(lambda: sum(1 for p in store.list(pods, "bench") if p["status"].get("phase") == "Running") == count,
                f"{count} pods Running")
    elapsed = time.perf_counter() - start
    await controllers.stop()
    baseline_store = Store(seed=1)
    baseline_store.create(baseline_store.resource_type("namespaces"), {"metadata": {"name": "bench"}})
    start = time.perf_counter()
    for index in range(count):
        baseline_store.create(baseline_store.resource_type("pods"), _pod(index))
    del running
    return elapsed, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    node_runs = [asyncio.run(nodes_ready(args.nodes)) for _ in range(args.repeat)]
    ready = statistics.median(r[0] for r in node_runs)
    stored = statistics.median(r[1] for r in node_runs)
    print(f"{args.nodes} nodes Ready: median {ready:.2f} s (goal <= 10 s); storing the same nodes without "
          f"controllers: {stored:.2f} s")
    pod_runs = [asyncio.run(pods_running_in_process(args.nodes, args.pods)) for _ in range(args.repeat)]
    running = statistics.median(r[0] for r in pod_runs)
    stored = statistics.median(r[1] for r in pod_runs)
    print(f"{args.pods} pods on {args.nodes} nodes created in-process -> Running: median {running:.2f} s "
          f"(goal <= 30 s); storing the same pods without controllers: {stored:.2f} s")


if __name__ == "__main__":
    main()
