"""Where the metrics come from, with a small suite of GPU pods run as a user would (subprocesses):

- the real-cluster path against the simulator acting as OpenShift: a route ``thanos-querier`` in
  ``openshift-monitoring`` in front of a token-protected querier (a real Prometheus scraping the simulator behind a
  proxy that wants the cluster's bearer token): without the token one line naming the URL and HTTP 401, the items
  pass without metric KPIs; with the kubeconfig's token the KPIs are there;
- Prometheus killed in the middle of a run: a clear note, the run goes on and passes, no traceback;
- without the prometheus binary: one line saying how to install it, nothing fails.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
needs_prometheus = pytest.mark.skipif(shutil.which("prometheus") is None,
                                      reason="needs Debian's prometheus package (apt-get install prometheus)")

CONFIG = """\
cluster:
  sim: {nodes: 2, gpu_profile: a100, gpus_per_node: 2, seed: 1}
namespace: {name: gpu-metrics}
metrics:
  prometheus: {token: kubeconfig, binary: prometheus, scrape_interval_s: 0.5}
"""

TEST = '''\
import os
import signal
import time
from pathlib import Path

import pytest


def kill_prometheus(root):
    for proc in Path("/proc").iterdir():
        try:
            words = (proc / "cmdline").read_bytes().split(b"\\0")
        except OSError:
            continue
        if words and words[0].endswith(b"prometheus") and any(str(root).encode() in w for w in words):
            os.kill(int(proc.name), signal.SIGKILL)


@pytest.mark.parametrize("step", [1, 2, 3])
def test_gpu_pod(step, cluster, namespace, kpis, topsail_artifacts_root, topsail_prometheus, artifact_dir):
    (artifact_dir / "source.txt").write_text(topsail_prometheus.description)
    if step == 2 and os.environ.get("KILL_PROMETHEUS"):
        kill_prometheus(topsail_artifacts_root)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"gpu-{step}", "namespace": namespace},
           "spec": {"restartPolicy": "Never", "containers": [{
               "name": "main", "image": "busybox", "command": ["sleep", "1.5"],
               "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    cluster.kube.create(pod)
    deadline = time.monotonic() + 30
    while True:
        current = cluster.kube.get(topsail_ref(pod))
        if (current.get("status") or {}).get("phase") == "Succeeded":
            break
        assert time.monotonic() < deadline, current.get("status")
        time.sleep(0.1)
    kpis.record("steps", step, unit="1", help="the step", lower_better=True)


def topsail_ref(pod):
    import pytest_topsail as topsail

    return topsail.ObjectRef.of(pod)
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "suites" / "gpu").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\ntopsail_suites = suites\n")
    (root / "suites" / "gpu" / "config.yaml").write_text(CONFIG)
    (root / "suites" / "gpu" / "test_gpu.py").write_text(TEST)
    return root


def run_pytest(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "suites", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               f"--artifacts={project / 'artifacts'}", f"--topsail-history={project / 'h.sqlite'}", *args]
    environment = {**os.environ, "COLUMNS": "200",
                   "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **(env or {})}
    environment.pop("ARTIFACT_DIR", None)
    return subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=180, env=environment)


def item_kpis(project: Path) -> dict[str, dict[str, float]]:
    found = {}
    for path in (project / "artifacts").rglob("item.json"):
        record = json.loads(path.read_text())
        found[record["test_id"]] = {k["name"]: k["value"] for k in record["kpis"]}
    return found


def notes(project: Path) -> list[str]:
    return [p.read_text() for p in (project / "artifacts").rglob("NOTE.txt")]


# ------------------------------------------------------------------ OpenShift's Thanos Querier, simulated
class Querier(http.server.BaseHTTPRequestHandler):
    """A token-protected querier in front of Prometheus, as OpenShift's oauth-proxy is in front of Thanos."""

    token = ""
    upstream = ""

    def do_GET(self) -> None:  # noqa: N802
        if self.headers.get("Authorization") != f"Bearer {self.token}":
            self.send_response(401)
            self.end_headers()
            self.wfile.write(b"Unauthorized\n")
            return
        answer = requests.get(self.upstream + self.path, timeout=10)
        self.send_response(answer.status_code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(answer.content)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def openshift(tmp_path: Path) -> Iterator[Path]:
    """A simulator with a route to a token-protected querier of a Prometheus scraping it; yields its kubeconfig."""
    from pytest_topsail.kube.client import connect
    from pytest_topsail.metrics.local import start_local, stop
    from pytest_topsail.metrics.source import kubeconfig_credentials
    from pytest_topsail.sim.controllers.olm import crd_manifest
    from pytest_topsail.sim.run.launcher import SimCluster

    # an OpenShift cluster whose GPU operator runs (a fresh simulator advertises no GPU and exports no DCGM metric)
    with SimCluster(nodes=2, gpu_profile="a100", gpus_per_node=2, preinstalled="gpu_operator",
                    workdir=tmp_path / "sim") as sim:
        url, token, ca = kubeconfig_credentials(sim.kubeconfig_path)
        local = start_local(binary="prometheus", private_dir=tmp_path / "private", artifacts_dir=tmp_path / "prom",
                            target_url=url, token=token, ca_pem=ca, interval_s=0.5, watch_pid=sim.pid)
        deadline = time.monotonic() + 60  # a new Prometheus scrapes after ~5 s (its discovery manager); more at load
        while not requests.get(local.url + "/api/v1/query", params={"query": "DCGM_FI_DEV_GPU_UTIL"},
                               timeout=5).json()["data"]["result"]:
            assert time.monotonic() < deadline, "the test's Prometheus does not scrape the simulator"
            time.sleep(0.2)
        handler = type("Handler", (Querier,), {"token": token, "upstream": local.url})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        kube = connect(sim.kubeconfig_path)
        try:
            kube.apply(crd_manifest("route.openshift.io", "v1", "Route", "routes", "Namespaced"))
            kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-monitoring"}})
            kube.apply({"apiVersion": "route.openshift.io/v1", "kind": "Route",
                        "metadata": {"name": "thanos-querier", "namespace": "openshift-monitoring"},
                        "spec": {"host": f"127.0.0.1:{server.server_address[1]}",
                                 "to": {"kind": "Service", "name": "thanos-querier"}}})
            yield sim.kubeconfig_path
        finally:
            kube.close()
            server.shutdown()
            server.server_close()
            stop(local.pid)


@needs_prometheus
def test_openshift_querier_401_without_the_token_kpis_with_it(project: Path, openshift: Path) -> None:
    refused = run_pytest(project, "--cluster", "kube", f"--kubeconfig={openshift}",
                         "--var", "metrics.prometheus.token=none")
    assert refused.returncode == 0, refused.stdout[-3000:] + refused.stderr[-2000:]
    output = refused.stdout + refused.stderr
    line = next(line for line in output.splitlines() if "HTTP 401" in line)
    assert "metrics: Prometheus http://127.0.0.1:" in line and "no token was sent" in line, line
    assert all("gpu_utilization_avg" not in kpis for kpis in item_kpis(project).values())
    assert "Traceback" not in output

    shutil.rmtree(project / "artifacts")
    allowed = run_pytest(project, "--cluster", "kube", f"--kubeconfig={openshift}")
    assert allowed.returncode == 0, allowed.stdout[-3000:] + allowed.stderr[-2000:]
    kpis = item_kpis(project)
    assert len(kpis) == 3
    for values in kpis.values():
        assert values["gpu_utilization_avg"] == 0  # the pods hold a GPU but do nothing on it
        assert values["gpu_memory_used_max"] == 0 and values["gpu_power_avg"] == 55  # an idle A100's draw
    sources = {p.read_text() for p in (project / "artifacts").rglob("source.txt")}
    assert len(sources) == 1 and sources.pop().startswith("http://127.0.0.1:")  # the route's host
    token = openshift.read_text().split("token:")[1].split()[0]
    for path in (project / "artifacts").rglob("*"):
        if path.is_file():
            assert token not in path.read_text(errors="replace"), path


@needs_prometheus
def test_prometheus_killed_mid_run_is_a_note_and_the_run_goes_on(project: Path) -> None:
    result = run_pytest(project, env={"KILL_PROMETHEUS": "1"})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "3 passed" in result.stdout
    assert "Traceback" not in output
    line = next(line for line in output.splitlines() if "unreachable" in line)
    assert "metrics: Prometheus http://127.0.0.1:" in line and "metric KPIs of this item absent" in line, line
    kpis = item_kpis(project)
    assert "gpu_utilization_avg" in kpis["test_gpu_pod[1]"]
    assert "gpu_utilization_avg" not in kpis["test_gpu_pod[2]"] and "gpu_utilization_avg" not in kpis[
        "test_gpu_pod[3]"]
    assert len([text for text in notes(project) if "unreachable" in text]) == 2


def test_without_the_binary_one_line_and_nothing_fails(project: Path) -> None:
    result = run_pytest(project, "--var", "metrics.prometheus.binary=prometheus-not-installed")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    lines = [line for line in output.splitlines() if "apt-get install prometheus" in line]
    assert lines and "prometheus-not-installed" in lines[0], output[-3000:]
    assert all("gpu_utilization_avg" not in kpis for kpis in item_kpis(project).values())
    assert len(item_kpis(project)) == 3


def test_bad_metrics_settings_stop_the_run_at_start_up(project: Path) -> None:
    result = run_pytest(project, "--var", "metrics.prometheus.scrape_interval_s=fast")
    assert result.returncode == 4, result.stdout[-2000:] + result.stderr[-2000:]
    output = result.stdout + result.stderr
    assert "suites/gpu/config.yaml: invalid metrics settings: key metrics.prometheus.scrape_interval_s" in output
    assert "Traceback" not in output and not (project / "artifacts").exists()


def test_suites_without_metrics_run_first_so_the_runs_prometheus_starts_before_it_is_needed(project: Path) -> None:
    """A new Prometheus scrapes only ~5 s after it starts: the items of suites without metrics run first (each group
    in collection order), the server starting when the first of them opens the cluster."""
    plain = project / "suites" / "plain"
    plain.mkdir()
    (plain / "config.yaml").write_text("cluster:\n  sim: {nodes: 2, gpu_profile: a100, gpus_per_node: 2, seed: 1}\n")
    (plain / "test_plain.py").write_text("import pytest\n\n\n@pytest.mark.parametrize('n', [1, 2])\n"
                                         "def test_plain(n, cluster):\n    pass\n")
    result = run_pytest(project, "--collect-only")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    ids = [line for line in result.stdout.splitlines() if "::" in line]
    assert ids == [f"suites/plain/test_plain.py::test_plain[{n}]" for n in (1, 2)] + [
        f"suites/gpu/test_gpu.py::test_gpu_pod[{step}]" for step in (1, 2, 3)]
    elsewhere = run_pytest(project, "--collect-only", "--topsail-prometheus", "http://127.0.0.1:9")  # not started
    first = next(line for line in elsewhere.stdout.splitlines() if "::" in line)
    assert first == "suites/gpu/test_gpu.py::test_gpu_pod[1]"
