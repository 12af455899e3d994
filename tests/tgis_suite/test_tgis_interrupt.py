"""Ctrl-C during a TGIS run against a cluster that outlives it (an external simulator standing for a real cluster),
serially and under ``-n 2``: the run ends within seconds and leaves nothing behind but its artifacts and history."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pytest_topsail.kube.client import Kube, connect

REPO = Path(__file__).resolve().parents[1].parent
# what the run creates on the cluster: the operators and OpenShift AI (rhoai fixture), its namespace, the workers
KINDS = (("v1", "Namespace"), ("operators.coreos.com/v1alpha1", "Subscription"),
         ("operators.coreos.com/v1alpha1", "ClusterServiceVersion"),
         ("dscinitialization.opendatahub.io/v1", "DSCInitialization"),
         ("datasciencecluster.opendatahub.io/v1", "DataScienceCluster"),
         ("serving.kserve.io/v1beta1", "InferenceService"), ("serving.kserve.io/v1alpha1", "ServingRuntime"),
         ("apps/v1", "Deployment"), ("v1", "Pod"))


def state(kube: Kube) -> set[tuple[str, str, str]]:
    found = set()
    for api_version, kind in KINDS:
        try:
            objects = kube.list(api_version, kind)
        except Exception:  # noqa: BLE001 - a CRD not registered (yet): nothing of that kind
            continue
        found |= {(kind, o["metadata"].get("namespace") or "", o["metadata"]["name"]) for o in objects
                  if not o["metadata"].get("deletionTimestamp")}
    return found


@pytest.fixture
def external(tmp_path: Path) -> Iterator[Kube]:
    from pytest_topsail.sim.run.launcher import SimCluster

    profile = {"node_pools": [{"name": "gpu", "count": 2, "gpu_profile": "a100"}]}
    with SimCluster(profile, workdir=tmp_path / "external") as sim:
        kube = connect(sim.kubeconfig_path)
        kube.apply({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "topsail-sim-operators", "namespace": "kube-system"},
                    "data": {"behaviour.yaml": yaml.safe_dump({"install_ms": 100, "ready_ms": 50})}})
        kube.kubeconfig = str(sim.kubeconfig_path)  # type: ignore[attr-defined]
        try:
            yield kube
        finally:
            kube.close()


@pytest.mark.parametrize("processes", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_ctrl_c_mid_run_ends_within_seconds_leaving_nothing_behind(tmp_path: Path, external: Kube,
                                                                   processes: list[str]) -> None:
    before = state(external)
    artifacts, history = tmp_path / "artifacts", tmp_path / "history.sqlite"
    command = [sys.executable, "-m", "pytest", "suites/tgis", "--preset", "smoke", "-p", "no:cacheprovider", "-q",
               "-p", "no:randomly", "--artifacts", str(artifacts), "--topsail-history", str(history),
               "--kubeconfig", external.kubeconfig, *processes]  # type: ignore[attr-defined]
    env = {key: value for key, value in os.environ.items()
           if key != "ARTIFACT_DIR" and not key.startswith("PYTEST_XDIST")}  # not an outer -n's worker
    env["PYTHONPATH"] = str(REPO)
    # its own process group, as a terminal's foreground job: Ctrl-C reaches pytest and everything it started
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=env, start_new_session=True)
    try:
        started = time.monotonic()
        deadline = started + 180
        # mid-run: workers deployed, items running, and two items' records processed by the process that reports
        # (lts.json, its last file of an item; the xdist controller under -n), so the outputs have items to cover
        while (len(list(artifacts.glob("tgis/*/answer.json"))) < 3
               or len(list(artifacts.glob("tgis/*/lts.json"))) < 2):
            assert time.monotonic() < deadline and process.poll() is None, "no item answered"
            time.sleep(0.1)
        seen = f"{len(list(artifacts.glob('tgis/*/answer.json')))} answers, run ended: {process.poll()}"
        os.killpg(process.pid, signal.SIGINT)
        interrupted = time.monotonic()
        output, _ = process.communicate(timeout=60)
        took = time.monotonic() - interrupted
        output = f"{output}\nSIGINT sent after {interrupted - started:.1f} s ({seen})"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert process.returncode == 2, output[-3000:]  # pytest's "interrupted"
    assert "KeyboardInterrupt" in output and "run interrupted" in output, output[-3000:]
    # no gRPC core log line (absl format: "I1125 13:02:41.631258 23842 chttp2_transport.cc:1403] ... Got goaway")
    assert not re.search(r"^[IW]\d{4} [\d:.]+ +\d+ \S+\.cc:\d+\]", output, re.MULTILINE), output[-3000:]
    print(f"exit {took:.1f} s after SIGINT")  # the benchmark's business: shown with -s, not asserted
    assert state(external) == before, output[-3000:]  # namespace, workers and OpenShift AI removed
    answered = len(list(artifacts.glob("tgis/*/answer.json")))
    with sqlite3.connect(history) as db:  # the history is whole: readable, and holds the finished items' KPIs
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        # (the item each process was running may have written its answer but not reported)
        in_flight = 2 if processes else 1
        assert db.execute("SELECT count(*) FROM kpis").fetchone()[0] >= max(answered - in_flight, 2)
