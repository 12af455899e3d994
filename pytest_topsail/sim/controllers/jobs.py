"""Job controller (batch/v1): creates pods from the template up to `parallelism` until `completions` pods succeeded
or more than `backoffLimit` failed; keeps status.active/ready/succeeded/failed, startTime, completionTime and the
Complete / Failed conditions. A suspended job (`spec.suspend`, as Kueue
keeps it until admitted) gets no pods and loses its active ones and its startTime, with the Suspended condition True;
unsuspended it starts (startTime now, Suspended False). Not simulated: Indexed completion mode, pod failure policies,
activeDeadlineSeconds, ttlSecondsAfterFinished. The decisions are pure functions of completion.py; this module
writes them."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, cast

from pytest_topsail.sim.controllers.base import condition, now_seconds, set_condition
from pytest_topsail.sim.controllers.completion import Outcome, finished, job_counts, job_outcome, job_pods_wanted
from pytest_topsail.sim.controllers.workload import WorkloadController, owned_pods, pod_from_template, suffix
from pytest_topsail.sim.machinery.apierror import ApiError


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
        counts = job_counts(owned_pods(self.store, self.pods, job))
        now = now_seconds()
        if not finished(job, ("Complete", "Failed")):
            outcome = job_outcome(spec, counts)
            if outcome is not None:
                status.setdefault("startTime", now)
                self._finish(job, status, now, outcome)
                self._delete(counts.active)
                counts.active = []
            elif spec.get("suspend"):
                self._suspend(job, status, now)
                self._delete(counts.active)
                counts.active = []
            else:
                self._resume(job, status, now)
                counts.active += self._create_pods(job, job_pods_wanted(spec, counts))
        status["active"] = len(counts.active)
        status["ready"] = sum(1 for p in counts.active if (condition(p, "Ready") or {}).get("status") == "True")
        status["succeeded"] = counts.succeeded
        status["failed"] = counts.failed
        for zero in ("active", "succeeded", "failed"):
            if not status[zero]:
                del status[zero]
        status["uncountedTerminatedPods"] = {}
        if status != (job.get("status") or {}):
            self.store.update(self.owners, {**job, "status": status}, subresource="status")

    def _create_pods(self, job: dict[str, Any], count: int) -> list[dict[str, Any]]:
        uid = job["metadata"]["uid"]
        created: list[dict[str, Any]] = []
        for _ in range(count):
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

    def _suspend(self, job: dict[str, Any], status: dict[str, Any], now: str) -> None:
        """Suspended (created so, or by a queue such as Kueue): active pods deleted, no startTime, the Suspended
        condition, as the Job controller does."""
        if (condition(job, "Suspended") or {}).get("status") == "True":
            return
        status.pop("startTime", None)
        status["conditions"] = set_condition(list(status.get("conditions") or ()), {
            "type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended",
            "lastProbeTime": now, "lastTransitionTime": now})
        self.store.record_event(job, "Suspended", "Job suspended", source="job-controller")

    def _resume(self, job: dict[str, Any], status: dict[str, Any], now: str) -> None:
        """Running: startTime set when it starts or resumes; the Suspended condition turns False on resume."""
        status.setdefault("startTime", now)
        if (condition(job, "Suspended") or {}).get("status") != "True":
            return
        status["conditions"] = set_condition(list(status.get("conditions") or ()), {
            "type": "Suspended", "status": "False", "reason": "JobResumed", "message": "Job resumed",
            "lastProbeTime": now, "lastTransitionTime": now})
        self.store.record_event(job, "Resumed", "Job resumed", source="job-controller")

    def _finish(self, job: dict[str, Any], status: dict[str, Any], now: str, outcome: Outcome) -> None:
        cond: dict[str, Any] = {"type": outcome.kind, "status": "True", "lastProbeTime": now,
                                "lastTransitionTime": now}
        if outcome.reason:
            cond["reason"] = outcome.reason
        if outcome.message:
            cond["message"] = outcome.message
        status["conditions"] = set_condition(list(status.get("conditions") or ()), cond)
        if outcome.kind == "Complete":
            status["completionTime"] = now
            self.store.record_event(job, "Completed", "Job completed", source="job-controller")
        else:
            self.store.record_event(job, outcome.reason, outcome.message, type="Warning", source="job-controller")

    def _delete(self, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            try:
                self.store.delete(self.pods, pod["metadata"]["namespace"], pod["metadata"]["name"])
            except ApiError:
                pass

