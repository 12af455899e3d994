"""The real-workload runtime through the simulator (a subprocess, as the cluster fixture runs it): a pod whose image
is in the profile's runtime table runs as a real process, as a kubelet would run it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from pytest_topsail.sim.run.launcher import SimCluster

pytestmark = pytest.mark.xdist_group("sim_realworkload")  # -n N: the module-scoped simulator once

PROFILE = {"seed": 1, "node_pools": [{"name": "cpu", "count": 1, "gpu_profile": "a100"}],
           "runtime": [{"image": "local/shell:*", "max_seconds": 20}]}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimCluster]:
    with SimCluster(PROFILE, start_timeout=60) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def core(sim: SimCluster) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(str(sim.kubeconfig_path)))


def shell_pod(name: str, script: str, **spec: Any) -> dict[str, Any]:
    container = spec.pop("container", {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", **spec, "containers": [
                {"name": "main", "image": "local/shell:1", "command": ["bash", "-c", script], **container}]}}


def wait_phase(core: client.CoreV1Api, name: str, timeout: float = 90) -> Any:  # ends at once on success
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = core.read_namespaced_pod(name, "default")
        if pod.status.phase in ("Succeeded", "Failed"):
            return pod
        time.sleep(0.1)
    raise AssertionError(f"pod {name} still {pod.status.phase} after {timeout}s")


def test_a_pod_runs_as_a_process_with_its_volumes_env_logs_and_termination_message(core):
    core.create_namespaced_config_map("default", {"metadata": {"name": "cm"}, "data": {"greeting": "hello"}})
    core.create_namespaced_secret("default", {"metadata": {"name": "sec"}, "stringData": {"token": "s3"}})
    script = ("cat /etc/config/greeting; echo; test \"$(cat /etc/secret/key)\" = s3 || echo wrong secret; "
              "echo \"env $WHO\"; echo oops >&2; hostname; "
              "echo shared > /data/file; getent hosts $(hostname) >/dev/null || echo unresolved; "
              "printf 'the real cause' > /dev/termination-log; printf 'no newline'; exit 3")
    pod = shell_pod("real-fail", script, volumes=[{"name": "c", "configMap": {"name": "cm"}},
                                                  {"name": "s", "secret": {"secretName": "sec",
                                                                           "items": [{"key": "token", "path": "key"}]}},
                                                  {"name": "d", "emptyDir": {}}],
                    container={"env": [{"name": "WHO", "value": "me"}],
                               "volumeMounts": [{"name": "c", "mountPath": "/etc/config"},
                                                {"name": "s", "mountPath": "/etc/secret"},
                                                {"name": "d", "mountPath": "/data"}]})
    core.create_namespaced_pod("default", pod)
    done = wait_phase(core, "real-fail")
    assert done.status.phase == "Failed"
    terminated = done.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason, terminated.message) == (3, "Error", "the real cause")
    log = core.read_namespaced_pod_log("real-fail", "default")
    assert log == "hello\nenv me\noops\nreal-fail\nno newline\n"  # stdout and stderr merged, as kubectl logs shows them


def test_env_from_secret_keys_and_a_declared_port_reached_through_its_annotation(core):
    core.create_namespaced_secret("default", {"metadata": {"name": "api"}, "stringData": {"key": "sk-1"}})
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "key"}}},
           {"name": "LISTEN_PORT", "value": "8471"}]
    script = 'echo "token $TOKEN port $LISTEN_PORT"; sleep 1'
    core.create_namespaced_pod("default", shell_pod("envref", script, container={
        "env": env, "ports": [{"containerPort": 8471}]}))
    pod = wait_phase(core, "envref")
    assert pod.status.phase == "Succeeded"
    [line] = core.read_namespaced_pod_log("envref", "default").splitlines()
    local = line.split()[-1]
    assert line.startswith("token sk-1 port ") and local != "8471"  # this pod's own local port for 8471
    assert pod.metadata.annotations["sim.topsail.io/endpoint-8471"] == f"127.0.0.1:{local}"
    missing = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "nope"}}}]
    core.create_namespaced_pod("default", shell_pod("envmissing", "echo ran", container={"env": missing}))
    failed = wait_phase(core, "envmissing")
    terminated = failed.status.container_statuses[0].state.terminated
    assert failed.status.phase == "Failed" and terminated.reason == "StartError"
    assert "Secret default/api key 'nope' not found" in terminated.message


def test_success_and_modelled_pods_side_by_side(core):
    core.create_namespaced_pod("default", shell_pod("real-ok", "echo done"))
    modelled = shell_pod("modelled", "echo never run")
    modelled["spec"]["containers"][0]["image"] = "busybox"
    modelled["spec"]["containers"][0]["command"] = ["sh", "-c", "echo modelled; exit 0"]
    core.create_namespaced_pod("default", modelled)
    done = wait_phase(core, "real-ok")
    assert done.status.phase == "Succeeded"
    assert done.status.container_statuses[0].state.terminated.reason == "Completed"
    assert wait_phase(core, "modelled").status.phase == "Succeeded"  # the mini-shell's model, as before


def test_a_process_past_max_seconds_is_killed(sim):
    with SimCluster({**PROFILE, "runtime": [{"image": "local/shell:*", "max_seconds": 1}]}, start_timeout=60) as short:
        api = client.CoreV1Api(config.new_client_from_config(str(short.kubeconfig_path)))
        api.create_namespaced_pod("default", shell_pod("slow", "echo start; sleep 300"))
        started = time.monotonic()
        terminated = wait_phase(api, "slow").status.container_statuses[0].state.terminated
        assert time.monotonic() - started < 60  # ~2 s quiet; far from the 300 s sleep
        assert (terminated.exit_code, terminated.reason) == (137, "DeadlineExceeded")
        assert "max_seconds (1s)" in terminated.message


def test_deletion_sends_sigterm_then_sigkill_after_the_grace_period(core, tmp_path):
    marker = tmp_path / "term"
    script = f"trap 'echo term > {marker}; sleep 30' TERM; echo up; while true; do sleep 0.1; done"
    core.create_namespaced_pod("default", shell_pod("graceful", script, terminationGracePeriodSeconds=1))
    deadline = time.monotonic() + 60
    while core.read_namespaced_pod("graceful", "default").status.phase != "Running" and time.monotonic() < deadline:
        time.sleep(0.1)
    while "up" not in core.read_namespaced_pod_log("graceful", "default") and time.monotonic() < deadline:
        time.sleep(0.1)
    core.delete_namespaced_pod("graceful", "default")
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.read_text() == "term\n"  # the trap ran: SIGTERM reached the container's first process
    deadline = time.monotonic() + 15  # the grace period (1 s) ends long before the trap's 30 s sleep would
    while _processes_with(str(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_with(str(marker))  # SIGKILL after the grace period ended the trap's sleep


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return [pid for pid in found if pid != os.getpid()]


def test_processes_never_outlive_a_killed_pytest(tmp_path):
    token = f"sleep {3000 + uuid.uuid4().int % 1000}.{os.getpid()}"
    runner = tmp_path / "runner.py"
    runner.write_text(textwrap.dedent(f"""
        import time
        from kubernetes import client, config
        from pytest_topsail.sim.run.launcher import SimCluster
        with SimCluster({PROFILE!r}, start_timeout=60) as sim:
            api = client.CoreV1Api(config.new_client_from_config(str(sim.kubeconfig_path)))
            api.create_namespaced_pod("default", {{"metadata": {{"name": "long"}}, "spec": {{"containers": [
                {{"name": "main", "image": "local/shell:1", "command": ["bash", "-c", "{token}"]}}]}}}})
            print("created", flush=True)
            time.sleep(120)
    """))
    process = subprocess.Popen([sys.executable, str(runner)], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "created"
        deadline = time.monotonic() + 30
        while not _processes_with(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_with(token), "the workload never started"
        process.send_signal(signal.SIGKILL)  # no cleanup code of the test process runs
        process.wait(30)
        deadline = time.monotonic() + 60  # ends as soon as the workload is gone (its sleep would last 3000+ s)
        while _processes_with(token) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _processes_with(token)
    finally:
        process.kill()
