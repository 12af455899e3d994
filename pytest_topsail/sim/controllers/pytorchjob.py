"""Kubeflow PyTorchJob controller (kubeflow.org/v1), in the style of the training operator.

On start it registers the PyTorchJob CRD (so `kubectl apply` of a PyTorchJob works on a fresh simulator). For each
PyTorchJob, after the profile's `jobs.sync` delay, it creates one pod per replica of `spec.pytorchReplicaSpecs`
(`<job>-master-0`, `<job>-worker-<i>`) from the replica's template, with the operator's labels
(`training.kubeflow.org/job-name`, `replica-type`, `replica-index`, `job-role=master`), the replica's restartPolicy and
the distributed environment (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK) in the `pytorch` container. It keeps
`status.replicaStatuses` (active/succeeded/failed per replica type), startTime, completionTime and the conditions
Created -> Running (all pods running) -> Succeeded (the master succeeded) or Failed (a pod failed and will not be
restarted: restartPolicy Never, or the containers' restarts reached `runPolicy.backoffLimit`, where 0 means the first
restart fails the job, as in the training operator). On completion, `runPolicy.cleanPodPolicy` All/Running deletes
pods; None (the default) keeps them.
Not simulated: per-replica Services, elastic policy, gang scheduling, activeDeadlineSeconds, suspend.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable
from typing import Any, cast

from pytest_topsail.sim.apierror import ApiError
from pytest_topsail.sim.controllers.base import condition, now_seconds, set_condition
from pytest_topsail.sim.controllers.workload import WorkloadController, owned_pods, owner_reference

GROUP = "kubeflow.org"
PLURAL = "pytorchjobs"
LABEL_PREFIX = "training.kubeflow.org/"
JOB_NAME_LABEL = LABEL_PREFIX + "job-name"
MASTER_PORT = 23456


def crd_manifest() -> dict[str, Any]:
    """The PyTorchJob CRD: one served version (v1), status subresource, open schema."""
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
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
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
    ]
    for container in spec.get("containers") or []:
        if container.get("name") == "pytorch":
            known = {e["name"] for e in env}
            container["env"] = [e for e in container.get("env") or [] if e.get("name") not in known] + env
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{rtype.lower()}-{index}",
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
            "ownerReferences": [owner_reference(job)],
        },
        "spec": spec,
    }


def phase(pod: dict[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


class PyTorchJobController(WorkloadController):
    name = "pytorchjobs"
    owner_kind = "PyTorchJob"
    owner_resource = (PLURAL, GROUP)

    def owner_type(self) -> Any:
        return self.store.register_crd(crd_manifest())  # so that PyTorchJobs can be applied on a fresh simulator

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
        finished = _finished(job)
        if not finished:
            for rank, (rtype, index, rspec) in enumerate(wanted):
                pod_name = f"{name}-{rtype.lower()}-{index}"
                if pod_name not in pods:
                    created = self._create_pod(job, pod_for_replica(job, rtype, index, rspec, len(wanted), rank))
                    if created is not None:
                        pods[pod_name] = created
        status["replicaStatuses"] = self._replica_statuses(name, wanted, pods)
        status.setdefault("startTime", now)
        if not finished:
            conditions = self._progress(job, wanted, pods, conditions, status, now)
        status["conditions"] = conditions
        if status != (job.get("status") or {}):
            self.store.update(self.owners, {**job, "status": status}, subresource="status")

    def _progress(self, job, wanted, pods, conditions, status, now) -> list[dict[str, Any]]:
        name = job["metadata"]["name"]
        master = pods.get(f"{name}-master-0")
        failed = [
            p for p in pods.values()
            if phase(p) == "Failed" and (p.get("spec") or {}).get("restartPolicy", "Never") == "Never"
        ]
        message = ""
        if failed:
            message = f"PyTorchJob {name} has failed because pod {failed[0]['metadata']['name']} failed."
        elif past_backoff_limit(job, pods.values()):
            message = f"PyTorchJob {name} has failed because it has reached the specified backoff limit."
        if message:
            conditions = self._set(conditions, "Running", "PyTorchJobFailed", message, now, "False")
            conditions = self._set(conditions, "Failed", "PyTorchJobFailed", message, now)
            status["completionTime"] = now
            self.store.record_event(job, "PyTorchJobFailed", message, type="Warning", source="pytorchjob-controller")
            self._clean(job, pods)
        elif master is not None and phase(master) == "Succeeded":
            message = f"PyTorchJob {name} is successfully completed."
            conditions = self._set(conditions, "Running", "PyTorchJobSucceeded", message, now, "False")
            conditions = self._set(conditions, "Succeeded", "PyTorchJobSucceeded", message, now)
            status["completionTime"] = now
            self.store.record_event(job, "PyTorchJobSucceeded", message, source="pytorchjob-controller")
            self._clean(job, pods)
        elif len(pods) >= len(wanted) and all(phase(p) in ("Running", "Succeeded") for p in pods.values()):
            conditions = self._set(conditions, "Running", "PyTorchJobRunning", f"PyTorchJob {name} is running.", now)
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
    def _replica_statuses(name: str, wanted, pods) -> dict[str, dict[str, int]]:
        """active / succeeded / failed pods per replica type, as the training operator reports them."""
        statuses: dict[str, dict[str, int]] = {}
        for rtype, index, _ in wanted:
            counts = statuses.setdefault(rtype, {})
            pod = pods.get(f"{name}-{rtype.lower()}-{index}")
            if pod is not None:
                field_name = {"Succeeded": "succeeded", "Failed": "failed"}.get(phase(pod), "active")
                counts[field_name] = counts.get(field_name, 0) + 1
        return statuses

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


def past_backoff_limit(job: dict[str, Any], pods) -> bool:
    """The restarts of the job's restartable pods reached `runPolicy.backoffLimit` (unset: never)."""
    limit = ((job.get("spec") or {}).get("runPolicy") or {}).get("backoffLimit")
    if limit is None:
        return False
    restarts = sum(
        int(status.get("restartCount") or 0)
        for pod in pods
        if (pod.get("spec") or {}).get("restartPolicy") in ("OnFailure", "Always")
        for status in (pod.get("status") or {}).get("containerStatuses") or ()
    )
    return restarts > 0 if int(limit) == 0 else restarts >= int(limit)


def _finished(job: dict[str, Any]) -> str | None:
    for kind in ("Succeeded", "Failed"):
        cond = condition(job, kind)
        if cond is not None and cond.get("status") == "True":
            return kind
    return None
