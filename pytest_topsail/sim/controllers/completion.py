"""When a workload is done, and what it still needs (pure, no store): the decisions of the Job and PyTorchJob
controllers, kept apart from their writes as scheduling.py is from scheduler.py.

- `finished(obj, kinds)`: the condition kind (of `kinds`) that is True on the object, if any.
- Job: `job_counts(pods)` (active pods, succeeded, failed with container restarts), `job_outcome(spec, counts)`
  (Failed with BackoffLimitExceeded once more than backoffLimit failed, Complete once enough succeeded),
  `job_pods_wanted(spec, counts)` (how many more pods to create).
- PyTorchJob: `pytorchjob_outcome(name, wanted, pods, backoff_limit)` (Failed when a pod with restartPolicy Never
  failed or the restarts reached runPolicy.backoffLimit, Succeeded when the master succeeded, Running when every
  replica runs) and `replica_statuses(name, wanted, pods)`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_topsail.sim.controllers.base import condition

TERMINAL = ("Succeeded", "Failed")


def phase(pod: dict[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def finished(obj: dict[str, Any], kinds: tuple[str, ...]) -> str | None:
    for kind in kinds:
        cond = condition(obj, kind)
        if cond is not None and cond.get("status") == "True":
            return kind
    return None


@dataclass
class JobCounts:
    active: list[dict[str, Any]] = field(default_factory=list)  # pods not ended nor being deleted
    succeeded: int = 0
    failed: int = 0  # failed pods plus container restarts of the active ones


@dataclass(frozen=True)
class Outcome:
    kind: str  # the condition type: Complete / Failed (Job), Succeeded / Failed / Running (PyTorchJob)
    reason: str
    message: str


def job_counts(pods: Iterable[dict[str, Any]]) -> JobCounts:
    counts = JobCounts()
    for pod in pods:
        if phase(pod) == "Succeeded":
            counts.succeeded += 1
        elif phase(pod) == "Failed":
            counts.failed += 1
        elif not pod["metadata"].get("deletionTimestamp"):
            counts.active.append(pod)
    counts.failed += sum(s.get("restartCount", 0) for p in counts.active
                         for s in (p.get("status") or {}).get("containerStatuses") or ())
    return counts


def job_outcome(spec: dict[str, Any], counts: JobCounts) -> Outcome | None:
    if counts.failed > int(spec.get("backoffLimit", 6)):
        return Outcome("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    completions = spec.get("completions")
    if (completions is not None and counts.succeeded >= completions) or (
            completions is None and counts.succeeded > 0 and not counts.active):
        return Outcome("Complete", "", "")
    return None


def job_pods_wanted(spec: dict[str, Any], counts: JobCounts) -> int:
    """Pods to create now: up to `parallelism` running, no more than the completions left; a work queue (no
    `completions`) adds none once one pod succeeded."""
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    if completions is None:
        wanted = 0 if counts.succeeded else parallelism
    else:
        wanted = min(parallelism, int(completions) - counts.succeeded)
    return max(0, wanted - len(counts.active))


Replica = tuple[str, int, dict[str, Any]]  # (replica type, index, replica spec)


def replica_pod_name(job_name: str, replica_type: str, index: int) -> str:
    return f"{job_name}-{replica_type.lower()}-{index}"


def pytorchjob_outcome(name: str, wanted: list[Replica], pods: dict[str, dict[str, Any]],
                       backoff_limit: Any) -> Outcome | None:
    failed = [p for p in pods.values()
              if phase(p) == "Failed" and (p.get("spec") or {}).get("restartPolicy", "Never") == "Never"]
    if failed:
        return Outcome("Failed", "PyTorchJobFailed",
                       f"PyTorchJob {name} has failed because pod {failed[0]['metadata']['name']} failed.")
    if past_backoff_limit(backoff_limit, pods.values()):
        return Outcome("Failed", "PyTorchJobFailed",
                       f"PyTorchJob {name} has failed because it has reached the specified backoff limit.")
    master = pods.get(replica_pod_name(name, "Master", 0))
    if master is not None and phase(master) == "Succeeded":
        return Outcome("Succeeded", "PyTorchJobSucceeded", f"PyTorchJob {name} is successfully completed.")
    if len(pods) >= len(wanted) and all(phase(p) in ("Running", "Succeeded") for p in pods.values()):
        return Outcome("Running", "PyTorchJobRunning", f"PyTorchJob {name} is running.")
    return None


def past_backoff_limit(limit: Any, pods: Iterable[dict[str, Any]]) -> bool:
    """The restarts of the restartable pods reached `runPolicy.backoffLimit` (None: never)."""
    if limit is None:
        return False
    restarts = sum(
        int(status.get("restartCount") or 0)
        for pod in pods
        if (pod.get("spec") or {}).get("restartPolicy") in ("OnFailure", "Always")
        for status in (pod.get("status") or {}).get("containerStatuses") or ()
    )
    return restarts > 0 if int(limit) == 0 else restarts >= int(limit)


def replica_statuses(name: str, wanted: list[Replica], pods: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
    """active / succeeded / failed pods per replica type, as the training operator reports them."""
    statuses: dict[str, dict[str, int]] = {}
    for replica_type, index, _ in wanted:
        counts = statuses.setdefault(replica_type, {})
        pod = pods.get(replica_pod_name(name, replica_type, index))
        if pod is not None:
            field_name = {"Succeeded": "succeeded", "Failed": "failed"}.get(phase(pod), "active")
            counts[field_name] = counts.get(field_name, 0) + 1
    return statuses
