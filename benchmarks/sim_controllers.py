"""Benchmarks of the simulator's controllers (not part of the test run).

    python benchmarks/sim_controllers.py [--nodes 5000] [--pods 10000] [--repeat 3] [--mode both|in-process|client]

1. nodes: a profile with N a100 GPU nodes -> seconds until every node is Ready (goal: 5,000 nodes <= 10 s).
   in-process: controllers started on a Store; client: `python -m pytest_topsail.sim` started with SimCluster,
   from start() until the official client lists N Ready nodes (process start and TLS setup included).
2. pods: P pods requesting one GPU each, with the default stage timings (initialize 20+0..20 ms, start 50+0..50 ms)
   -> seconds from the first create until all are Running (goal: 10,000 pods <= 5 s through the client; kwok's CI bar is
   60 s with a real apiserver). client: created by 16 threads through the official client, Running counted from a watch;
   printed beside it, the CPU seconds the simulator and the client process spent meanwhile (on a 2-core machine the
   wall time cannot be below their sum / 2).
Each figure is printed beside the same work without the controllers' part, measured in the same run: storing the same
objects in a bare Store (in-process), or creating the same pods through the client against a server started with
--api-only (client). Medians of --repeat runs, each run measuring both sides one after the other.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pytest_topsail.sim.controllers import start_controllers
from pytest_topsail.sim.controllers.nodeobjects import node_object
from pytest_topsail.sim.controllers.profile import Profile
from pytest_topsail.sim.registry.store import Store

TIMEOUT = 180.0
NAMESPACE = "bench"
CREATE_THREADS = 16


def _profile_data(nodes: int) -> dict[str, Any]:
    return {"seed": 1, "node_pools": [{"name": "gpu", "count": nodes, "gpu_profile": "a100"}], "preinstalled": ["all"]}


def _profile(nodes: int) -> Profile:
    return Profile.from_dict(_profile_data(nodes), source="benchmark")


def _pod(index: int) -> dict[str, Any]:
    requests = {"cpu": "50m", "memory": "1Mi", "nvidia.com/gpu": "1"}
    limits = {"nvidia.com/gpu": "1"}  # an extended resource needs a limit equal to its request, as on the apiserver
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"bench-{index:06d}", "namespace": NAMESPACE, "labels": {"app": "bench"}},
            "spec": {"containers": [{"name": "c", "image": "sim", "command": ["sleep", "infinity"],
                                     "resources": {"requests": requests, "limits": limits}}]}}


def _ready(node: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions") or ())


async def _wait(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what} after {TIMEOUT:.0f} s")
        await asyncio.sleep(0.05)


class RunningCounter:
    """Counts pods that reached phase Running, from store events (so waiting costs nothing per poll)."""

    def __init__(self) -> None:
        self.running: set[str] = set()

    def __call__(self, event_type: str, rtype: Any, obj: dict[str, Any]) -> None:
        if rtype.key == ("", "pods") and (obj.get("status") or {}).get("phase") == "Running":
            self.running.add(obj["metadata"]["name"])


# ---------------------------------------------------------------------------------------------------- in-process
async def nodes_ready_in_process(count: int) -> tuple[float, float]:
    """(seconds until all nodes Ready with the node controller, seconds to store the same nodes without it)."""
    profile = _profile(count)
    store = Store(seed=1)
    nodes = store.resource_type("nodes")
    start = time.perf_counter()
    controllers = await start_controllers(store, profile, ["pytest_topsail.sim.controllers.nodes:NodeController"])
    await _wait(lambda: len(store.list(nodes)) == count and all(_ready(n) for n in store.list(nodes)),
                f"{count} nodes Ready")
    with_controllers = time.perf_counter() - start
    await controllers.stop()
    bare = Store(seed=1)
    start = time.perf_counter()
    for index in range(count):
        bare.create(bare.resource_type("nodes"), node_object(profile.node_pools[0], 0, index))
    return with_controllers, time.perf_counter() - start


async def pods_running_in_process(nodes: int, count: int) -> tuple[float, float]:
    """(seconds from the first create until all pods Running with every controller, seconds to store them bare)."""
    store = Store(seed=1)
    controllers = await start_controllers(store, _profile(nodes))
    store.create(store.resource_type("namespaces"), {"metadata": {"name": NAMESPACE}})
    pods = store.resource_type("pods")
    counter = RunningCounter()
    store.add_listener(counter)
    start = time.perf_counter()
    for index in range(count):
        store.create(pods, _pod(index))
        if index % 200 == 0:
            await asyncio.sleep(0)  # the server would interleave request handling the same way
    await _wait(lambda: len(counter.running) == count, f"{count} pods Running")
    elapsed = time.perf_counter() - start
    await controllers.stop()
    bare = Store(seed=1)
    bare.create(bare.resource_type("namespaces"), {"metadata": {"name": NAMESPACE}})
    start = time.perf_counter()
    for index in range(count):
        bare.create(bare.resource_type("pods"), _pod(index))
    return elapsed, time.perf_counter() - start


# ---------------------------------------------------------------------------------------------------- client
def through_client(nodes: int, count: int) -> tuple[float, float, float, float, float]:
    """(nodes Ready seconds, pods Running seconds, pod creation seconds, the simulator's and this process's CPU
    seconds from the first create until all Running) against the real server process."""
    import kubernetes

    from pytest_topsail.sim.run.launcher import SimCluster

    start = time.perf_counter()
    with SimCluster(_profile_data(nodes), start_timeout=TIMEOUT) as sim:
        config = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(str(sim.kubeconfig_path), client_configuration=config)
        config.connection_pool_maxsize = CREATE_THREADS + 2
        api = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))
        deadline = time.monotonic() + TIMEOUT
        while True:
            items = api.list_node(_preload_content=False)
            listed = json.loads(items.data)["items"]
            if len(listed) == nodes and all(_ready(n) for n in listed):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"gave up waiting for {nodes} nodes Ready after {TIMEOUT:.0f} s")
            time.sleep(0.05)
        nodes_ready = time.perf_counter() - start
        api.create_namespace({"metadata": {"name": NAMESPACE}})
        watcher = _RunningWatch(api, count)
        watcher.start()
        assert sim.pid is not None
        sim_cpu, client_cpu = _cpu_seconds(sim.pid), time.process_time()
        start = time.perf_counter()
        with ThreadPoolExecutor(CREATE_THREADS) as pool:
            list(pool.map(lambda i: _create_pod(api, i), range(count)))
        created = time.perf_counter() - start
        if not watcher.done.wait(TIMEOUT):
            raise TimeoutError(f"only {len(watcher.running)} of {count} pods Running after {TIMEOUT:.0f} s")
        running = watcher.finished_at - start
        sim_cpu, client_cpu = _cpu_seconds(sim.pid) - sim_cpu, time.process_time() - client_cpu
        watcher.stop()
    return nodes_ready, running, created, sim_cpu, client_cpu


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def creating_without_controllers(count: int) -> float:
    """Seconds to create the same pods through the client against a server started with --api-only."""
    import kubernetes

    from pytest_topsail.sim.run.launcher import SimCluster

    with SimCluster(_profile_data(1), start_timeout=TIMEOUT, extra_args=("--api-only",)) as sim:
        config = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(str(sim.kubeconfig_path), client_configuration=config)
        config.connection_pool_maxsize = CREATE_THREADS + 2
        api = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))
        api.create_namespace({"metadata": {"name": NAMESPACE}})
        start = time.perf_counter()
        with ThreadPoolExecutor(CREATE_THREADS) as pool:
            list(pool.map(lambda i: _create_pod(api, i), range(count)))
        return time.perf_counter() - start


def _create_pod(api: Any, index: int) -> None:
    """Create one pod without building the client's model objects; reading the body returns the connection to
    the pool (an unread response would cost a new TLS connection per request)."""
    response = api.create_namespaced_pod(NAMESPACE, _pod(index), _preload_content=False)
    response.data  # noqa: B018


class _RunningWatch(threading.Thread):
    """Watches pods of the namespace and notes when `count` of them have been seen Running."""

    def __init__(self, api: Any, count: int) -> None:
        super().__init__(daemon=True)
        import kubernetes

        self.api, self.count = api, count
        # Watching from the version before the first create: no transition is missed, however late the watch starts.
        self.since = api.list_namespaced_pod(NAMESPACE).metadata.resource_version
        self.watch = kubernetes.watch.Watch()
        self.running: set[str] = set()
        self.done = threading.Event()
        self.finished_at = 0.0

    def run(self) -> None:
        # deserialize=False: turning 50,000 events into V1Pod models would make this watcher, not the simulator,
        # the bottleneck (it shares the GIL with the creating threads)
        stream = self.watch.stream(self.api.list_namespaced_pod, NAMESPACE, timeout_seconds=int(TIMEOUT),
                                   resource_version=self.since, deserialize=False)
        for event in stream:
            pod = event["object"]
            if (pod.get("status") or {}).get("phase") == "Running":
                self.running.add(pod["metadata"]["name"])
                if len(self.running) == self.count:
                    self.finished_at = time.perf_counter()
                    self.done.set()
                    return

    def stop(self) -> None:
        self.watch.stop()


def _median(runs: list[tuple[float, ...]], index: int) -> float:
    return statistics.median(r[index] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mode", choices=["both", "in-process", "client"], default="both")
    args = parser.parse_args()
    print(f"{args.repeat} run(s) each, medians")
    if args.mode in ("both", "in-process"):
        runs = [asyncio.run(nodes_ready_in_process(args.nodes)) for _ in range(args.repeat)]
        print(f"in-process: {args.nodes} nodes Ready {_median(runs, 0):.2f} s (goal <= 10 s); "
              f"storing the same nodes bare {_median(runs, 1):.2f} s")
        runs = [asyncio.run(pods_running_in_process(args.nodes, args.pods)) for _ in range(args.repeat)]
        print(f"in-process: {args.pods} pods on {args.nodes} nodes created -> Running {_median(runs, 0):.2f} s "
              f"(goal <= 5 s at 10,000 pods); storing the same pods bare {_median(runs, 1):.2f} s")
    if args.mode in ("both", "client"):
        runs = [(*through_client(args.nodes, args.pods), creating_without_controllers(args.pods))
                for _ in range(args.repeat)]
        print(f"client: {args.nodes} nodes Ready {_median(runs, 0):.2f} s after SimCluster.start() (goal <= 10 s)")
        print(f"client: {args.pods} pods created -> Running {_median(runs, 1):.2f} s (goal <= 5 s at 10,000 pods); "
              f"creating them took {_median(runs, 2):.2f} s ({args.pods / _median(runs, 2):.0f} creates/s, "
              f"{CREATE_THREADS} threads); creating them on an --api-only server (no controllers) "
              f"{_median(runs, 5):.2f} s ({args.pods / _median(runs, 5):.0f} creates/s)")
        print(f"client: CPU seconds until all Running: simulator {_median(runs, 3):.2f} s, the client process "
              f"{_median(runs, 4):.2f} s (creates and the watch; on 2 cores the two share the machine)")


if __name__ == "__main__":
    main()
