"""Kubeflow PyTorchJob controller (kubeflow.org/v1), in the style of the training operator.

The PyTorchJob kind is served while OpenShift AI's trainingoperator component is (controllers/rhoai.py: Managed in
the DataScienceCluster, or preinstalled by the profile); on a fresh cluster a PyTorchJob gets the API's 404. For each
PyTorchJob, after the profile's `jobs.sync` delay, it creates one pod per replica of `spec.pytorchReplicaSpecs`
(`<job>-master-0`, `<job>-worker-<i>`) from the replica's template, with the operator's labels
(`training.kubeflow.org/job-name`, `replica-type`, `replica-index`, `job-role=master`), the replica's restartPolicy and
the distributed environment (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and torchrun's PET_MASTER_ADDR,
PET_MASTER_PORT, PET_NNODES, PET_NODE_RANK, plus PET_NPROC_PER_NODE when `spec.nprocPerNode` is set) in the
`pytorch` container. It keeps
`status.replicaStatuses` (active/succeeded/failed per replica type), startTime, completionTime and the conditions
Created -> Running (all pods running) -> Succeeded (the master succeeded) or Failed (a pod failed and will not be
restarted: restartPolicy Never, or the containers' restarts reached `runPolicy.backoffLimit`, where 0 means the first
restart fails the job, as in the training operator). On completion, `runPolicy.cleanPodPolicy` All/Running deletes
pods; None (the default) keeps them.
A suspended PyTorchJob (`runPolicy.suspend`, as Kueue keeps it until admitted) has no pods (they are deleted) and no
startTime, with Suspended True (Running False); resumed, Suspended turns False and its pods are created.
Not simulated: per-replica Services, elastic policy, gang scheduling, activeDeadlineSeconds.
The decisions are pure functions of completion.py; this module writes them.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable
from typing import Any, cast

from pytest_topsail.sim.controllers.base import condition, now_seconds, set_condition
from pytest_topsail.sim.controllers.completion import (
    Outcome,
    finished,
    phase,
    pytorchjob_outcome,
    replica_pod_name,
    replica_statuses,
)
from pytest_topsail.sim.controllers.workload import WorkloadController, owned_pods, owner_reference
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.registry.crd_schemas import openapi_schema

GROUP = "kubeflow.org"
PLURAL = "pytorchjobs"
LABEL_PREFIX = "training.kubeflow.org/"
JOB_NAME_LABEL = LABEL_PREFIX + "job-name"
MASTER_PORT = 23456


def crd_manifest() -> dict[str, Any]:
    """The PyTorchJob CRD: one served version (v1), status subresource, structural schema."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": PLURAL, "singular": "pytorchjob", "kind": "PyTorchJob", "listKind": "PyTorchJobList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": openapi_schema(GROUP, "PyTorchJob", "v1")},
                }
            ],
        },
    }


def replica_pods(job: dict[str, Any]) -> list[tuple[str, int, dict[str, Any]]]:
    """(replica type, index, replica spec) for every pod the job wants: Master first, then the others."""
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    ordered = sorted(specs.items(), key=lambda item: (item[0] != "Master", item[0]))
    return [
        (rtype, index, rspec)
        for rtype, rspec in ordered
        if isinstance(rspec, dict)
        for index in range(int(rspec.get("replicas", 1)))
    ]


def pod_for_replica(job: dict[str, Any], rtype: str, index: int, rspec: dict[str, Any], world: int, rank: int):
    meta = job["metadata"]
    template = copy.deepcopy(rspec.get("template") or {})
    labels = {
        **((template.get("metadata") or {}).get("labels") or {}),
        LABEL_PREFIX + "operator-name": "pytorchjob-controller",
        JOB_NAME_LABEL: meta["name"],
        LABEL_PREFIX + "replica-type": rtype.lower(),
        LABEL_PREFIX + "replica-index": str(index),
    }
    if rtype == "Master":
        labels[LABEL_PREFIX + "job-role"] = "master"
    spec = template.get("spec") or {}
    restart = rspec.get("restartPolicy", "Never")
    spec["restartPolicy"] = "Never" if restart == "ExitCode" else restart
    master = f"{meta['name']}-master-0"
    env = [
        {"name": "MASTER_ADDR", "value": master if rtype != "Master" else "localhost"},
        {"name": "MASTER_PORT", "value": str(MASTER_PORT)},
        {"name": "WORLD_SIZE", "value": str(world)},
        {"name": "RANK", "value": str(rank)},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "PET_MASTER_ADDR", "value": master if rtype != "Master" else "localhost"},
        {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
        {"name": "PET_NNODES", "value": str(world)},
        {"name": "PET_NODE_RANK", "value": str(rank)},
    ]
    nproc = (job.get("spec") or {}).get("nprocPerNode")
    if nproc is not None:
        env.append({"name": "PET_NPROC_PER_NODE", "value": str(nproc)})
    for container in spec.get("containers") or []:
        if container.get("name") == "pytorch":
            known = {e["name"] for e in env}
            container["env"] = [e for e in container.get("env") or [] if e.get("name") not in known] + env
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": replica_pod_name(meta["name"], rtype, index),
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
            "ownerReferences": [owner_reference(job)],
        },
        "spec": spec,
    }


class PyTorchJobController(WorkloadController):
    name = "pytorchjobs"
    owner_kind = "PyTorchJob"
    owner_resource = (PLURAL, GROUP)

    def pods_of(self, job: dict[str, Any]) -> dict[str, dict[str, Any]]:
        pods = owned_pods(self.store, self.pods, job, selector={JOB_NAME_LABEL: job["metadata"]["name"]})
        return {p["metadata"]["name"]: p for p in pods}

    async def reconcile(self, key: Hashable) -> None:
        namespace, name = cast(tuple[str, str], key)
        job = self.store.find(self.owners, namespace, name)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        status = copy.deepcopy(job.get("status") or {})
        now = now_seconds()
        conditions = list(status.get("conditions") or ())
        if condition(job, "Created") is None:
            conditions = self._set(conditions, "Created", "PyTorchJobCreated", "PyTorchJob is created.", now)
            self.store.record_event(job, "PyTorchJobCreated", f"PyTorchJob {name} is created.",
                                    source="pytorchjob-controller")
        wanted = replica_pods(job)
        pods = self.pods_of(job)
        done = finished(job, ("Succeeded", "Failed"))
        if not done and ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"):
            status["conditions"] = self._suspend(job, pods, conditions, status, now)
            if status != (job.get("status") or {}):
                self.store.update(self.owners, {**job, "status": status}, subresource="status")
            return
        if (condition(job, "Suspended") or {}).get("status") == "True":
            conditions = self._set(conditions, "Suspended", "PyTorchJobResumed", "PyTorchJob is resumed.", now,
                                   "False")
            status.pop("startTime", None)
        if not done:
            for rank, (rtype, index, rspec) in enumerate(wanted):
                pod_name = replica_pod_name(name, rtype, index)
                if pod_name not in pods:
                    created = self._create_pod(job, pod_for_replica(job, rtype, index, rspec, len(wanted), rank))
                    if created is not None:
                        pods[pod_name] = created
        status["replicaStatuses"] = replica_statuses(name, wanted, pods)
        status.setdefault("startTime", now)
        limit = ((job.get("spec") or {}).get("runPolicy") or {}).get("backoffLimit")
        outcome = None if done else pytorchjob_outcome(name, wanted, pods, limit)
        if outcome is not None:
            conditions = self._apply(job, pods, outcome, conditions, status, now)
        status["conditions"] = conditions
        if status != (job.get("status") or {}):
            self.store.update(self.owners, {**job, "status": status}, subresource="status")

    def _suspend(self, job: dict[str, Any], pods: dict[str, dict[str, Any]], conditions: list[dict[str, Any]],
                 status: dict[str, Any], now: str) -> list[dict[str, Any]]:
        """Suspended (`runPolicy.suspend`, as Kueue keeps it until admitted): pods deleted, no startTime,
        Suspended True and Running False, as the training operator does."""
        for pod in pods.values():
            try:
                self.store.delete(self.pods, pod["metadata"]["namespace"], pod["metadata"]["name"])
            except ApiError:
                pass
        status.pop("startTime", None)
        status["replicaStatuses"] = replica_statuses(job["metadata"]["name"], replica_pods(job), {})
        if condition(job, "Running") is not None:
            conditions = self._set(conditions, "Running", "PyTorchJobSuspended", "PyTorchJob is suspended.", now,
                                   "False")
        return self._set(conditions, "Suspended", "PyTorchJobSuspended", "PyTorchJob is suspended.", now)

    def _apply(self, job: dict[str, Any], pods: dict[str, dict[str, Any]], outcome: Outcome,
               conditions: list[dict[str, Any]], status: dict[str, Any], now: str) -> list[dict[str, Any]]:
        if outcome.kind == "Running":
            return self._set(conditions, "Running", outcome.reason, outcome.message, now)
        conditions = self._set(conditions, "Running", outcome.reason, outcome.message, now, "False")
        conditions = self._set(conditions, outcome.kind, outcome.reason, outcome.message, now)
        status["completionTime"] = now
        kind = "Warning" if outcome.kind == "Failed" else "Normal"
        self.store.record_event(job, outcome.reason, outcome.message, type=kind, source="pytorchjob-controller")
        self._clean(job, pods)
        return conditions

    def _create_pod(self, job: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any] | None:
        try:
            created = self.store.create(self.pods, pod)
        except ApiError as exc:
            if exc.reason != "AlreadyExists":
                self.store.record_event(job, "FailedCreatePod", f"Error creating: {exc.message}", type="Warning",
                                        source="pytorchjob-controller")
            return None
        self.store.record_event(job, "SuccessfulCreatePod", f"Created pod: {pod['metadata']['name']}",
                                source="pytorchjob-controller")
        return created

    @staticmethod
    def _set(conditions, kind: str, reason: str, message: str, now: str, value: str = "True") -> list[dict]:
        new = {"type": kind, "status": value, "reason": reason, "message": message, "lastUpdateTime": now,
               "lastTransitionTime": now}
        return set_condition(conditions, new)

    def _clean(self, job: dict[str, Any], pods: dict[str, dict[str, Any]]) -> None:
        policy = ((job.get("spec") or {}).get("runPolicy") or {}).get("cleanPodPolicy", "None")
        for pod in pods.values():
            if policy == "All" or (policy == "Running" and phase(pod) in ("Pending", "Running")):
                try:
                    self.store.delete(self.pods, pod["metadata"]["namespace"], pod["metadata"]["name"])
                except ApiError:
                    pass

