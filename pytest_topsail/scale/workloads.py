"""Manifests of the scale test's workloads: training (Job), distributed (PyTorchJob), interactive (Deployment).

Every object carries the run label (``topsail.scale/run``) and the job label (``topsail.scale/job``); pod templates
carry both too, so that the pods the controllers create can be matched to their job without asking the controllers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_topsail.errors import TopsailError

RUN_LABEL = "topsail.scale/run"
JOB_LABEL = "topsail.scale/job"
INDEX_LABEL = "topsail.scale/index"

WORKLOAD_TYPES = ("training", "distributed", "interactive")
WORKLOAD_KINDS = {
    "training": ("batch/v1", "Job"),
    "distributed": ("kubeflow.org/v1", "PyTorchJob"),
    "interactive": ("apps/v1", "Deployment"),
}


@dataclass(frozen=True)
class WorkloadSpec:
    """What one job of the scale test looks like."""

    workload: str = "training"
    gpus: int = 1  # nvidia.com/gpu per pod
    workers: int = 1  # distributed only: worker pods beside the master
    pvc: bool = False  # one PersistentVolumeClaim per job, mounted at /data
    duration_s: float | None = None  # None: runs until deleted (sleep infinity)
    cpu: str = "50m"
    memory: str = "1Mi"
    image: str = "registry.access.redhat.com/ubi9/ubi-minimal:latest"
    storage: str = "1Gi"
    extra_labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.workload not in WORKLOAD_TYPES:
            raise TopsailError(f"unknown workload type {self.workload!r}: expected one of {', '.join(WORKLOAD_TYPES)}")
        if self.gpus < 0 or self.workers < 0:
            raise TopsailError(f"gpus ({self.gpus}) and workers ({self.workers}) must not be negative")

    @property
    def pods_per_job(self) -> int:
        return 1 + self.workers if self.workload == "distributed" else 1

    @property
    def completes(self) -> bool:
        """Whether a job of this spec is expected to finish by itself."""
        return self.workload != "interactive" and self.duration_s is not None

    @property
    def kind(self) -> tuple[str, str]:
        return WORKLOAD_KINDS[self.workload]


def job_name(prefix: str, index: int) -> str:
    return f"{prefix}-{index:05d}"


def job_objects(spec: WorkloadSpec, name: str, namespace: str, run_id: str, index: int) -> list[dict[str, Any]]:
    """The objects to create for one job, in creation order (the PVC before the workload that mounts it)."""
    labels = {RUN_LABEL: run_id, JOB_LABEL: name, INDEX_LABEL: str(index), **spec.extra_labels}
    objects: list[dict[str, Any]] = []
    claim = f"{name}-data" if spec.pvc else None
    if claim:
        objects.append(pvc_object(claim, namespace, labels, spec.storage))
    template = pod_template(spec, labels, claim)
    builder = {"training": job_object, "distributed": pytorchjob_object, "interactive": deployment_object}
    objects.append(builder[spec.workload](spec, name, namespace, labels, template))
    return objects


def container(spec: WorkloadSpec, name: str, claim: str | None) -> dict[str, Any]:
    sleep = "infinity" if spec.duration_s is None or spec.workload == "interactive" else f"{spec.duration_s:g}"
    resources: dict[str, Any] = {"requests": {"cpu": spec.cpu, "memory": spec.memory}}
    if spec.gpus:
        resources["requests"]["nvidia.com/gpu"] = str(spec.gpus)
        resources["limits"] = {"nvidia.com/gpu": str(spec.gpus)}
    result: dict[str, Any] = {"name": name, "image": spec.image, "command": ["sleep", sleep], "resources": resources}
    if claim:
        result["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return result


def pod_template(spec: WorkloadSpec, labels: dict[str, str], claim: str | None) -> dict[str, Any]:
    container_name = "pytorch" if spec.workload == "distributed" else "main"
    pod_spec: dict[str, Any] = {
        "containers": [container(spec, container_name, claim)],
        "restartPolicy": "Never" if spec.workload == "training" else ("OnFailure" if spec.completes else "Always"),
        "terminationGracePeriodSeconds": 0,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if claim:
        pod_spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return {"metadata": {"labels": dict(labels)}, "spec": pod_spec}


def job_object(spec: WorkloadSpec, name: str, namespace: str, labels: dict, template: dict) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": template},
    }


def pytorchjob_object(spec: WorkloadSpec, name: str, namespace: str, labels: dict, template: dict) -> dict[str, Any]:
    restart = "OnFailure" if spec.completes else "Never"
    replicas: dict[str, Any] = {"Master": {"replicas": 1, "restartPolicy": restart, "template": template}}
    if spec.workers:
        replicas["Worker"] = {"replicas": spec.workers, "restartPolicy": restart, "template": template}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        # backoffLimit 0: a crashed pod fails the job (counted as failed), like the training Job's backoffLimit 0.
        "spec": {"runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 0}, "pytorchReplicaSpecs": replicas},
    }


def deployment_object(spec: WorkloadSpec, name: str, namespace: str, labels: dict, template: dict) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"replicas": 1, "selector": {"matchLabels": {JOB_LABEL: name}}, "template": template},
    }


def pvc_object(name: str, namespace: str, labels: dict, storage: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}},
    }
