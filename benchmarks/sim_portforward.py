"""Benchmark of the simulator's port-forward against the direct loopback address (not part of the test run).

    python benchmarks/sim_portforward.py [--round-trips 2000] [--megabytes 32] [--rounds 5]

A pod of a simulator (``python -m pytest_topsail.sim``) serves container port 8033 on a loopback TCP echo server
(annotation ``sim.topsail.io/endpoint-8033``). Side by side in one run, rounds alternating between the three paths:
the echo server's address directly (what a load test uses), ``kubectl port-forward`` (SPDY/3.1 inside a WebSocket)
and ``kubernetes.stream.portforward`` (the official client's channel protocol). Per path: the median round trip of
64-byte messages on one connection, and the throughput of echoing --megabytes (MB/s). Reported as medians over
rounds and as ratios to the direct path; no goal: the figures say what the tunnel costs a client that uses it.
"""

from __future__ import annotations

import argparse
import queue
import socket
import socketserver
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client, config
from kubernetes.stream import portforward

from pytest_topsail.sim.run.launcher import SimCluster

WAIT = 30.0
MESSAGE = b"x" * 64


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.settimeout(WAIT)
        try:
            while data := self.request.recv(1 << 20):
                self.request.sendall(data)
        except OSError:
            pass


def _round_trips(sock: Any, count: int) -> float:
    """Median seconds of one 64-byte request/response on an open connection."""
    times = []
    for _ in range(count):
        start = time.perf_counter()
        sock.sendall(MESSAGE)
        received = 0
        while received < len(MESSAGE):
            data = sock.recv(len(MESSAGE) - received)
            if not data:
                raise RuntimeError("connection closed during the round trips")
            received += len(data)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _throughput(sock: Any, megabytes: int) -> float:
    payload = b"y" * (1 << 20)
    start = time.perf_counter()
    sender = threading.Thread(target=lambda: [sock.sendall(payload) for _ in range(megabytes)], daemon=True)
    sender.start()
    received, wanted = 0, megabytes << 20
    while received < wanted:
        data = sock.recv(1 << 20)
        if not data:
            raise RuntimeError("connection closed during the transfer")
        received += len(data)
    sender.join(WAIT)
    return megabytes / (time.perf_counter() - start)


def _measure(connect: Callable[[], Any], round_trips: int, megabytes: int) -> tuple[float, float]:
    sock = connect()
    try:
        sock.settimeout(WAIT)
        return _round_trips(sock, round_trips), _throughput(sock, megabytes)
    finally:
        sock.close()


def _start_kubectl(kubeconfig: str, pod: str) -> tuple[subprocess.Popen[str], int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        local = probe.getsockname()[1]
    process = subprocess.Popen(["kubectl", "--kubeconfig", kubeconfig, "port-forward", f"pod/{pod}", f"{local}:8033"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()], daemon=True).start()
    line = lines.get(timeout=WAIT)
    if not line.startswith("Forwarding from"):
        raise RuntimeError(f"kubectl port-forward: {line}")
    return process, local


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-trips", type=int, default=2000)
    parser.add_argument("--megabytes", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    echo = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    echo.daemon_threads = True
    threading.Thread(target=echo.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    echo_port = echo.server_address[1]
    with SimCluster({"seed": 1, "node_pools": [{"name": "cpu", "count": 1}]}) as sim:
        kubeconfig = str(sim.kubeconfig_path)
        core = client.CoreV1Api(config.new_client_from_config(kubeconfig))
        core.create_namespaced_pod("default", {
            "metadata": {"name": "echo", "annotations": {"sim.topsail.io/endpoint-8033": f"127.0.0.1:{echo_port}"}},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "infinity"]}]}})
        deadline = time.monotonic() + WAIT
        while (core.read_namespaced_pod("echo", "default").status.phase or "") != "Running":
            if time.monotonic() > deadline:
                raise RuntimeError("the echo pod did not start")
            time.sleep(0.05)
        kubectl, local = _start_kubectl(kubeconfig, "echo")
        paths: dict[str, Callable[[], Any]] = {
            "direct": lambda: socket.create_connection(("127.0.0.1", echo_port), timeout=WAIT),
            "kubectl port-forward": lambda: socket.create_connection(("127.0.0.1", local), timeout=WAIT),
            "client portforward": lambda: portforward(core.connect_get_namespaced_pod_portforward, "echo",
                                                      "default", ports="8033").socket(8033),
        }
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
        try:
            for _ in range(args.rounds):
                for name, connect in paths.items():
                    results[name].append(_measure(connect, args.round_trips, args.megabytes))
        finally:
            kubectl.terminate()
            kubectl.communicate(timeout=WAIT)
    echo.shutdown()
    direct_rtt = statistics.median(r for r, _ in results["direct"])
    direct_mbs = statistics.median(t for _, t in results["direct"])
    print(f"{'path':22} {'p50 round trip':>15} {'x direct':>9} {'MB/s':>8} {'x direct':>9}")
    for name, values in results.items():
        rtt = statistics.median(r for r, _ in values)
        mbs = statistics.median(t for _, t in values)
        print(f"{name:22} {rtt * 1e6:12.0f} us {rtt / direct_rtt:9.1f} {mbs:8.0f} {mbs / direct_mbs:9.2f}")


if __name__ == "__main__":
    main()
