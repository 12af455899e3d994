"""Job controller (batch/v1): creates pods from the template up to `parallelism` until `completions` pods succeeded
or more than `backoffLimit` failed; keeps status.active/ready/succeeded/failed, startTime, completionTime and the
Complete / Failed conditions. Not simulated: Indexed completion mode, pod failure policies, activeDeadlineSeconds,
ttlSecondsAfterFinished, suspend of a running job (a suspended job simply gets no new pods)."""

from __future__ import annotations

import copy
from collections.abc import Hashable
from typing import Any

from pytest_topsail.sim.apierror import ApiError
from pytest_topsail.sim.controllers.base import Controller, condition, now_seconds, set_condition, stable_fraction

_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def owner_reference(owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def owner_key(pod: dict[str, Any], kind: str) -> tuple[str, str] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("kind") == kind and ref.get("controller"):
            return (pod["metadata"].get("namespace") or "", ref["name"])
    return None


def owned_pods(store: Any, pods_type: Any, owner: dict[str, Any]) -> list[dict[str, Any]]:
    """Pods of the owner's namespace matching its selector and controlled by it."""
    meta = owner["metadata"]
    selector = ((owner.get("spec") or {}).get("selector") or {}).get("matchLabels") or None
    uid = meta["uid"]
    return [
        p for p in store.list(pods_type, meta.get("namespace"), label_selector=selector)
        if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or ())
    ]


def pod_from_template(owner: dict[str, Any], name: str, extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
    metadata = template.get("metadata") or {}
    labels = {**(metadata.get("labels") or {}), **(extra_labels or {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": owner["metadata"].get("namespace"),
            "labels": labels,
            "annotations": dict(metadata.get("annotations") or {}),
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": template.get("spec") or {},
    }


def suffix(seed: int, *parts: object) -> str:
    number = int(stable_fraction(seed, *parts) * 2**40)
    chars = []
    for _ in range(5):
        number, index = divmod(number, len(_SUFFIX_ALPHABET))
        chars.append(_SUFFIX_ALPHABET[index])
    return "".join(chars)


class JobController(Controller):
    name = "jobs"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.jobs = self.store.resource_type("jobs", "batch")
        self.pods = self.store.resource_type("pods")
        self.created: dict[str, int] = {}  # job uid -> pods created so far (names the next one)

    async def on_start(self) -> None:
        self.watch("jobs", "batch", self._on_job)
        self.watch("pods", "", self._on_pod)
        for job in self.store.list(self.jobs):
            self._on_job("ADDED", job)

    def _on_job(self, event_type: str, job: dict[str, Any]) -> None:
        key = (job["metadata"].get("namespace") or "", job["metadata"]["name"])
        if event_type == "DELETED":
            self.created.pop(job["metadata"]["uid"], None)
            self.cancel_timer(key)
        elif event_type == "ADDED":
            self.enqueue_after(self.delay(self.profile.jobs.sync, *key), key)
        elif not self.has_timer(key):
            self.enqueue(key)

    def _on_pod(self, event_type: str, pod: dict[str, Any]) -> None:
        key = owner_key(pod, "Job")
        if key is not None and not self.has_timer(key):
            self.enqueue(key)

    async def reconcile(self, key: Hashable) -> None:
        namespace, name = key  # type: ignore[misc]
        job = self.store.find(self.jobs, namespace, name)
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
        status["ready"] = sum(1 for p in active if condition(p, "Ready") and condition(p, "Ready").get("status") ==
                              "True")
        status["succeeded"] = succeeded
        status["failed"] = failed
        for zero in ("active", "succeeded", "failed"):
            if not status[zero]:
                del status[zero]
        status["uncountedTerminatedPods"] = {}
        if status != (job.get("status") or {}):
            self.store.update(self.jobs, {**job, "status": status}, subresource="status")

    def _create_pods(self, job: dict[str, Any], active: int, succeeded: int) -> list[dict[str, Any]]:
        spec = job.get("spec") or {}
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        if completions is None:  # a work queue: once one pod succeeded, the work is done and no pod is added
            wanted = 0 if succeeded else parallelism
        else:
            wanted = min(parallelism, int(completions) - succeeded)
        uid = job["metadata"]["uid"]
        created = []
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
