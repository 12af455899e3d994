"""From a fresh cluster to results, as a user on a real cluster would: a standalone simulator started bare (no GPU
advertised, no Kubeflow/KServe kind served), then the built-in suites with ``--cluster kube`` against it. The
simulator's audit log shows what each run applied, in order (docs/fresh-cluster.md)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.kube.client import connect
from tests.fixtures.fixture_project import ExternalCluster, listed, output

REPO = Path(__file__).resolve().parents[2]
DOWNLOAD_IMAGE = "registry.access.redhat.com/ubi9/python-311:*"
PREPARED = ("subscriptions", "clusterpolicies", "nodefeaturediscoveries", "dscinitializations", "datascienceclusters",
            "persistentvolumeclaims", "jobs")


@pytest.fixture
def bare_cluster(tmp_path: Path) -> Iterator[ExternalCluster]:
    """A standalone simulator as fresh as a new cluster; the download image runs download.py for real, as a
    real cluster's python image would."""
    from pytest_topsail.sim.run.launcher import SimCluster

    profile = {"node_pools": [{"name": "gpu", "count": 2, "gpu_profile": "a100", "gpus_per_node": 8}],
               "runtime": [{"image": DOWNLOAD_IMAGE, "max_seconds": 120}]}
    with SimCluster(profile, workdir=tmp_path / "external", audit_log=True) as sim:
        cluster = ExternalCluster(sim)
        try:
            yield cluster
        finally:
            cluster.kube.close()


def run_suites(cluster: ExternalCluster, tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--cluster", "kube",
               "--kubeconfig", cluster.kubeconfig, "--artifacts", str(tmp_path / name),
               "--topsail-history", str(tmp_path / "history.sqlite"), "--var", "metrics.enabled=false", *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)


def created(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(resource, namespace) of each object created, in order."""
    return [(r["resource"], r["namespace"] or "") for r in records if r["verb"] == "create" and r["code"] == 201]


def first(sequence: list[tuple[str, str]], resource: str, namespace: str | None = None) -> int:
    return next(i for i, (kind, ns) in enumerate(sequence) if kind == resource and namespace in (None, ns))


def step(root: Path, component: str, name: str) -> Path:
    [directory] = root.glob(f"*__{component}/*__{name}")
    return directory


def test_a_fresh_cluster_serves_nothing_the_suites_need(bare_cluster: ExternalCluster) -> None:
    kube = bare_cluster.kube
    assert not kube.has_kind("kubeflow.org/v1", "PyTorchJob")
    assert not kube.has_kind("serving.kserve.io/v1beta1", "InferenceService")
    assert all("nvidia.com/gpu" not in (node["status"].get("allocatable") or {}) for node in listed(kube, "v1", "Node"))


def test_fine_tuning_prepares_a_fresh_cluster_in_order_then_finds_it_prepared(
        bare_cluster: ExternalCluster, tmp_path: Path) -> None:
    first_run = run_suites(bare_cluster, tmp_path, "first", "-m", "fine_tuning", "--preset", "smoke,keep")
    assert first_run.returncode == 0, output(first_run)
    order = created(bare_cluster.audit())
    gpu_sub, rhoai_sub = first(order, "subscriptions", "nvidia-gpu-operator"), first(order, "subscriptions",
                                                                                      "redhat-ods-operator")
    steps = [first(order, "subscriptions", "openshift-nfd"), gpu_sub, first(order, "clusterpolicies"), rhoai_sub,
             first(order, "datascienceclusters"), first(order, "persistentvolumeclaims", "fine-tuning-testing"),
             first(order, "jobs", "fine-tuning-testing"), first(order, "pytorchjobs")]
    assert steps == sorted(steps), order
    kube = bare_cluster.kube
    [dsc] = listed(kube, "datasciencecluster.opendatahub.io/v1", "DataScienceCluster")
    assert dsc["spec"]["components"]["trainingoperator"]["managementState"] == "Managed"
    assert kube.has_kind("kubeflow.org/v1", "PyTorchJob")
    log = (step(tmp_path / "first", "storage", "download_dataset_alpaca_tiny.json") / "download.log").read_text()
    assert "alpaca_tiny.json: 1 file(s), 45095 bytes" in log  # copied for real by the download Job's pod

    before = len(bare_cluster.audit())
    second_run = run_suites(bare_cluster, tmp_path, "second", "-m", "fine_tuning", "--preset", "smoke,keep")
    assert second_run.returncode == 0, output(second_run)
    again = [kind for kind, _ in created(bare_cluster.audit()[before:]) if kind in PREPARED]
    assert again == [], f"the second run prepared again: {again}"
    skipped = step(tmp_path / "second", "storage", "download_dataset_alpaca_tiny.json") / "skipped.txt"
    assert "not downloaded again" in skipped.read_text()
    progress = (step(tmp_path / "second", "gpu_operator", "clusterpolicy") / "progress.log").read_text()
    assert "ClusterPolicy gpu-cluster-policy exists: kept as it is" in progress

    # the kept operators and PVC: a run with cleanup.before removes them first, and its own cleanup at the end
    third_run = run_suites(bare_cluster, tmp_path, "third", "-m", "fine_tuning", "--preset", "smoke",
                           "--var", "gpu_operator.cleanup.before=true", "--var", "rhoai.cleanup.before=true",
                           "--var", "storage.cleanup.before=true")
    assert third_run.returncode == 0, output(third_run)
    assert step(tmp_path / "third", "gpu_operator", "cleanup_before").is_dir()
    deleted = {(r["resource"], r["namespace"] or "") for r in bare_cluster.audit()
               if r["verb"] == "delete" and r["code"] in (200, 202)}
    assert ("subscriptions", "nvidia-gpu-operator") in deleted and ("datascienceclusters", "") in deleted
    assert listed(kube, "operators.coreos.com/v1alpha1", "Subscription") == []
    assert listed(kube, "v1", "PersistentVolumeClaim") == []
    fresh = connect(bare_cluster.kubeconfig)  # discovery of the cluster as it is now, nothing cached
    try:
        assert not fresh.has_kind("kubeflow.org/v1", "PyTorchJob")
    finally:
        fresh.close()


def test_llm_load_and_scale_stand_on_their_preparation(bare_cluster: ExternalCluster, tmp_path: Path) -> None:
    result = run_suites(bare_cluster, tmp_path, "run", "-m", "llm_load or scale", "--preset", "smoke",
                        "-k", "not distributed and not auto")
    assert result.returncode == 0, output(result)
    order = created(bare_cluster.audit())
    gpu_sub, dsc = first(order, "subscriptions", "nvidia-gpu-operator"), first(order, "datascienceclusters")
    assert gpu_sub < dsc < first(order, "inferenceservices")
    assert gpu_sub < first(order, "jobs")  # the scale suite's jobs
    components = (step(tmp_path / "run", "rhoai", "datasciencecluster") / "manifests").glob("*.yaml")
    assert "kserve:\n      managementState: Managed" in "".join(p.read_text() for p in components)


def test_a_cluster_used_as_it_is_must_serve_the_kinds(bare_cluster: ExternalCluster, tmp_path: Path) -> None:
    result = run_suites(bare_cluster, tmp_path, "run", "-m", "fine_tuning", "--preset", "smoke",
                        "--var", "rhoai.prepare=false")
    text = output(result)
    assert result.returncode != 0
    assert ("kind PyTorchJob is not served by this cluster: OpenShift AI's trainingoperator component is not "
            "Managed") in text
    assert "Traceback" not in text
    assert "1 error" in text and "passed" not in text  # the run stopped at its first item
    assert "Interrupted: the cluster preparation of suite fine_tuning failed" in text
    assert not any(r["resource"] == "pytorchjobs" for r in bare_cluster.audit())


def test_a_kind_no_component_serves_is_named_with_its_component(tmp_path: Path) -> None:
    """The suite's stack prepared without the component its items need: each item's message names the component
    and what to set, not an API 404."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "fine_tuning", "--preset", "smoke",
               "--var", "rhoai.components.trainingoperator=false", "--var", "metrics.enabled=false",
               "--artifacts", str(tmp_path / "run"), "--topsail-history", str(tmp_path / "history.sqlite")]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    text = output(result)
    assert result.returncode == 1 and "2 failed" in text, text[-3000:]
    assert ("kind PyTorchJob (kubeflow.org/v1) is not served by this cluster" in text
            and "OpenShift AI's trainingoperator component is not Managed (set rhoai.components.trainingoperator: "
                "true" in text), text[-3000:]
    assert "Traceback" not in text


def test_a_misspelled_stack_entry_stops_the_run_naming_the_closest(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "scale", "--preset", "smoke",
               "--var", "cluster.stack=[gpu_operatr]", "--artifacts", str(tmp_path / "run"),
               "--topsail-history", str(tmp_path / "history.sqlite")]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    text = output(result)
    assert result.returncode != 0 and "Traceback" not in text
    assert ("suites/scale/config.yaml: cluster.stack: no fixture named 'gpu_operatr' (did you mean 'gpu_operator'?"
            in text), text[-3000:]
    assert "1 error" in text and "passed" not in text  # stopped at the first item
