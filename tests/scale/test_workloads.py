"""Manifests of the three workload types."""

from __future__ import annotations

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.scale.workloads import JOB_LABEL, RUN_LABEL, WorkloadSpec, job_objects


def test_training_is_a_job_requesting_gpus_with_labelled_pods():
    (job,) = job_objects(WorkloadSpec(gpus=2, duration_s=5), "j-00001", "ns", "run1", 1)
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert container["command"] == ["sleep", "5"]
    assert job["spec"]["template"]["metadata"]["labels"][JOB_LABEL] == "j-00001"
    assert job["metadata"]["labels"][RUN_LABEL] == "run1"


def test_distributed_is_a_pytorchjob_with_master_and_workers():
    spec = WorkloadSpec(workload="distributed", workers=3)
    (job,) = job_objects(spec, "j-00000", "ns", "r", 0)
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert job["kind"] == "PyTorchJob" and job["apiVersion"] == "kubeflow.org/v1"
    assert replicas["Master"]["replicas"] == 1 and replicas["Worker"]["replicas"] == 3
    assert replicas["Worker"]["template"]["spec"]["containers"][0]["name"] == "pytorch"
    assert spec.pods_per_job == 4 and not spec.completes


def test_interactive_is_a_deployment_running_forever():
    spec = WorkloadSpec(workload="interactive", duration_s=10)
    (deployment,) = job_objects(spec, "j-00000", "ns", "r", 0)
    template = deployment["spec"]["template"]
    assert deployment["kind"] == "Deployment" and template["spec"]["restartPolicy"] == "Always"
    assert template["spec"]["containers"][0]["command"] == ["sleep", "infinity"]
    assert deployment["spec"]["selector"]["matchLabels"][JOB_LABEL] == "j-00000"
    assert not spec.completes


def test_pvc_comes_first_and_is_mounted():
    pvc, job = job_objects(WorkloadSpec(pvc=True, gpus=0), "j-00000", "ns", "r", 0)
    assert pvc["kind"] == "PersistentVolumeClaim" and pvc["metadata"]["name"] == "j-00000-data"
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == "j-00000-data"
    assert "limits" not in pod_spec["containers"][0]["resources"]


def test_unknown_workload_type_is_a_clear_error():
    with pytest.raises(TopsailError, match="unknown workload type 'notebook'"):
        WorkloadSpec(workload="notebook")
