"""Job controller (batch/v1): creates pods from the template up to `parallelism` until `completions` pods succeeded
or more than `backoffLimit` failed; keeps status.active/ready/succeeded/failed, startTime, completionTime and the
Complete / Failed conditions. Not simulated: Indexed completion mode, pod failure policies, activeDeadlineSeconds,
ttlSecondsAfterFinished, suspend of a running job (a suspended job simply gets no new pods)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, cast

from pytest_topsail.sim.apierror import ApiError
from pytest_topsail.sim.controllers.base import condition, now_seconds, set_condition
from pytest_topsail.sim.controllers.workload import WorkloadController, owned_pods, pod_from_template, suffix


class JobController(WorkloadController):
    name = "jobs"
    owner_kind = "Job"
    owner_resource = ("jobs", "batch")

    async def reconcile(self, key: Hashable) -> None:
        namespace, name = cast(tuple[str, str], key)
        job = self.store.find(self.owners, namespace, name)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        spec = job.get("spec") or {}
        status = dict(job.get("status") or {})
        finished = _finished(job)
        pods = owned_pods(self.store, self.pods, job)
        active = [p for p in pods if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
                  and not p["metadata"].get("deletionTimestamp")]
        succeeded = sum(1 for p in pods if p.get("status", {}).get("phase") == "Succeeded")
        failed = sum(1 for p in pods if p.get("status", {}).get("phase") == "Failed")
        failed += sum(s.get("restartCount", 0) for p in active for s in p.get("status", {}).get("containerStatuses")
                      or ())
        completions = spec.get("completions")
        now = now_seconds()
        status.setdefault("startTime", now)
        if not finished:
            if failed > int(spec.get("backoffLimit", 6)):
                finished = "Failed"
                self._finish(job, status, now, "Failed", "BackoffLimitExceeded", "Job has reached the specified "
                                                                                 "backoff limit")
                self._delete(active)
                active = []
            elif (completions is not None and succeeded >= completions) or (
                    completions is None and succeeded > 0 and not active):
                finished = "Complete"
                self._finish(job, status, now, "Complete", None, None)
                self._delete(active)
                active = []
            elif not spec.get("suspend"):
                active += self._create_pods(job, len(active), succeeded)
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if (condition(p, "Ready") or {}).get("status") == "True")
        status["succeeded"] = succeeded
        status["failed"] = failed
        for zero in ("active", "succeeded", "failed"):
            if not status[zero]:
                del status[zero]
        status["uncountedTerminatedPods"] = {}
        if status != (job.get("status") or {}):
            self.store.update(self.owners, {**job, "status": status}, subresource="status")

    def _create_pods(self, job: dict[str, Any], active: int, succeeded: int) -> list[dict[str, Any]]:
        spec = job.get("spec") or {}
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        if completions is None:  # a work queue: once one pod succeeded, the work is done and no pod is added
            wanted = 0 if succeeded else parallelism
        else:
            wanted = min(parallelism, int(completions) - succeeded)
        uid = job["metadata"]["uid"]
        created: list[dict[str, Any]] = []
        for _ in range(max(0, wanted - active)):
            while True:
                number = self.created.get(uid, 0)
                self.created[uid] = number + 1
                name = f"{job['metadata']['name'][:57]}-{suffix(self.seed, uid, number)}"
                labels = {"batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
                          "batch.kubernetes.io/job-name": job["metadata"]["name"], "job-name": job["metadata"]["name"]}
                try:
                    pod = self.store.create(self.pods, pod_from_template(job, name, labels))
                except ApiError as exc:
                    if exc.reason == "AlreadyExists":
                        continue
                    self.store.record_event(job, "FailedCreate", f"Error creating: {exc.message}", type="Warning",
                                            source="job-controller")
                    return created
                break
            self.store.record_event(job, "SuccessfulCreate", f"Created pod: {name}", source="job-controller")
            created.append(pod)
        return created

    def _finish(self, job: dict[str, Any], status: dict[str, Any], now: str, kind: str, reason: str | None,
                message: str | None) -> None:
        cond: dict[str, Any] = {"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        status["conditions"] = set_condition(list(status.get("conditions") or ()), cond)
        if kind == "Complete":
            status["completionTime"] = now
            self.store.record_event(job, "Completed", "Job completed", source="job-controller")
        else:
            self.store.record_event(job, reason or "Failed", message or "Job failed", type="Warning",
                                    source="job-controller")

    def _delete(self, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            try:
                self.store.delete(self.pods, pod["metadata"]["namespace"], pod["metadata"]["name"])
            except ApiError:
                pass


def _finished(job: dict[str, Any]) -> str | None:
    for kind in ("Complete", "Failed"):
        cond = condition(job, kind)
        if cond is not None and cond.get("status") == "True":
            return kind
    return None
