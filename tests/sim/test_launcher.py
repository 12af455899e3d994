"""SimCluster: the simulator as a subprocess, as the cluster fixture uses it."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml
from kubernetes import client, config

from pytest_topsail.errors import TopsailError
from pytest_topsail.sim.run.launcher import SimCluster

pytestmark = pytest.mark.xdist_group("sim_launcher")  # -n N: the module-scoped simulator once

PROFILE = {"seed": 3, "node_pools": [{"name": "gpu", "count": 3, "gpu_profile": "h100"}],
           "preinstalled": ["gpu_operator"]}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimCluster]:
    with SimCluster(PROFILE, audit_log=True, start_timeout=60) as cluster:
        yield cluster


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_official_client_lists_the_profile_nodes(sim: SimCluster) -> None:
    api = client.CoreV1Api(config.new_client_from_config(str(sim.kubeconfig_path)))
    nodes = api.list_node().items
    assert len(nodes) == 3
    assert {n.metadata.labels["nvidia.com/gpu.product"] for n in nodes} == {"NVIDIA-H100-80GB-HBM3"}
    assert sim.url is not None and sim.url.startswith("https://127.0.0.1:")


def test_kubectl_get_nodes(sim: SimCluster) -> None:
    result = subprocess.run(["kubectl", "get", "nodes", "-o", "name"], env={**os.environ, **sim.environ()},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.split()) == 3


def test_requests_without_the_token_get_401(sim: SimCluster, tmp_path: Path) -> None:
    assert sim.kubeconfig_path is not None
    cluster = yaml.safe_load(sim.kubeconfig_path.read_text())["clusters"][0]["cluster"]
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    response = requests.get(f"{sim.url}/api/v1/nodes", verify=str(ca_file), timeout=10)
    assert response.status_code == 401
    assert response.json()["kind"] == "Status"


def test_kubeconfig_is_private_and_the_token_stays_out_of_the_output(sim: SimCluster) -> None:
    assert sim.kubeconfig_path is not None
    assert sim.kubeconfig_path.stat().st_mode & 0o077 == 0
    token = yaml.safe_load(sim.kubeconfig_path.read_text())["users"][0]["user"]["token"]
    assert len(token) >= 32
    assert token not in sim.output()
    assert "serving https://127.0.0.1:" in sim.output()


def test_audit_log_records_mutating_requests(sim: SimCluster) -> None:
    api = client.CoreV1Api(config.new_client_from_config(str(sim.kubeconfig_path)))
    api.create_namespace({"metadata": {"name": "audited"}})
    assert sim.audit_log_path is not None
    records = [json.loads(line) for line in sim.audit_log_path.read_text().splitlines()]
    created = [r for r in records if r["verb"] == "create" and r["name"] in (None, "audited")
               and r["resource"] == "namespaces"]
    assert created and created[-1]["code"] == 201
    assert {"time", "verb", "resource", "namespace", "name", "userAgent", "code"} <= set(created[-1])


def test_stop_ends_the_process_and_removes_the_temporary_workdir() -> None:
    cluster = SimCluster({"node_pools": []}).start()
    pid, workdir = cluster.pid, cluster.workdir
    assert pid is not None and workdir is not None and workdir.exists()
    assert cluster.stop() == 0
    assert not _alive(pid)
    assert not workdir.exists()


def test_child_exits_when_the_parent_is_killed(tmp_path: Path, wait_until) -> None:
    parent_script = textwrap.dedent(f"""
        import sys, time
        from pytest_topsail.sim.run.launcher import SimCluster
        cluster = SimCluster({{"node_pools": []}}, workdir={str(tmp_path)!r}).start()
        print(cluster.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        assert _alive(child_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        wait_until(lambda: not _alive(child_pid), timeout=15, what=f"simulator pid {child_pid} to exit")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


def test_port_in_use_is_one_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(TopsailError, match=rf"--port {port}: cannot listen on 127.0.0.1:{port}") as raised:
            SimCluster({"node_pools": []}, port=port, workdir=tmp_path).start()
    assert "Traceback" not in str(raised.value)


def test_bad_profile_is_one_clear_error_before_any_process_starts(tmp_path: Path) -> None:
    cluster = SimCluster({"node_pools": [{"name": "x", "count": 1, "gpu_profile": "nope"}]}, workdir=tmp_path)
    with pytest.raises(TopsailError) as raised:
        cluster.start()
    assert str(raised.value).startswith("simulated cluster profile: invalid simulator profile: "
                                        "key node_pools[0].gpu_profile: unknown GPU profile 'nope'")
    assert cluster.pid is None and not (tmp_path / "sim.log").exists()


def test_a_bad_profile_file_is_checked_by_the_child_with_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("node_pools: [{name: x, gpu_profile: nope}]\n")
    started = time.monotonic()
    with pytest.raises(TopsailError, match=r"p\.yaml.*node_pools\[0\]\.gpu_profile") as raised:
        SimCluster(path, workdir=tmp_path / "work").start()
    assert "Traceback" not in str(raised.value)
    assert time.monotonic() - started < 30


def test_the_child_runs_the_profile_built_by_the_launcher(tmp_path: Path) -> None:
    """A mapping is built once (shortcuts applied) and handed over as JSON: the child serves exactly that profile."""
    from pytest_topsail.sim.run.profile import build_profile, load_built

    pool = {"name": "big", "count": 1, "gpu_profile": "t4", "labels": {"on": "yes"}}
    built = build_profile({"node_pools": [pool], "plugins": {"fine_tuning": {"time_scale": 0.5}}})
    with SimCluster(built, nodes=2, seed=9, workdir=tmp_path) as cluster:
        assert load_built(tmp_path / "profile.json") == built.with_overrides(nodes=2, seed=9)
        assert "--built-profile" in cluster.command() and "--nodes" not in cluster.command()
        api = client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig_path)))
        nodes = api.list_node().items
        assert sorted(n.metadata.name for n in nodes) == ["big-0000", "big-0001"]
        assert {n.metadata.labels["on"] for n in nodes} == {"yes"}  # a string that YAML would read as a boolean


def test_started_from_a_thread_that_ends_the_cluster_keeps_running() -> None:
    import threading

    started: list[SimCluster] = []
    thread = threading.Thread(target=lambda: started.append(SimCluster({"node_pools": []}).start()))
    thread.start()
    thread.join(60)
    assert started, "SimCluster.start() did not return"
    cluster = started[0]
    try:
        assert cluster.pid is not None
        arguments = Path(f"/proc/{cluster.pid}/cmdline").read_bytes().split(b"\0")
        assert b"--parent-pipe" in arguments and b"--parent-death-signal" not in arguments
        time.sleep(0.5)  # PR_SET_PDEATHSIG would have fired when the starting thread ended
        assert cluster.running
        api = client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig_path)))
        assert api.list_namespace().items
    finally:
        assert cluster.stop() == 0
