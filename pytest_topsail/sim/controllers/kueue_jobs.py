"""The job kinds Kueue manages in the simulator (its "integrations"), pure: how each is suspended, what pod sets its
Workload gets, when it is finished. batch/v1 Job: `spec.suspend`, one pod set `main` of `parallelism` pods, finished
with Complete / Failed. Kubeflow PyTorchJob: `spec.runPolicy.suspend`, one pod set per replica type lowercased
(`master`, `worker`) of `replicas` pods, finished with Succeeded / Failed. `Integration.with_suspend` also adds the
admitted flavors' node labels to every pod template's nodeSelector when it unsuspends."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_topsail.sim.controllers.completion import finished

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
Obj = dict[str, Any]


def queue_name(obj: Obj) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)


def _job_podsets(job: Obj) -> list[Obj]:
    spec = job.get("spec") or {}
    return [{"name": "main", "count": int(spec.get("parallelism", 1)), "template": spec.get("template") or {}}]


def _pytorchjob_podsets(job: Obj) -> list[Obj]:
    replicas = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    ordered = sorted(replicas.items(), key=lambda item: (item[0] != "Master", item[0]))
    return [{"name": rtype.lower(), "count": int(rspec.get("replicas", 1)), "template": rspec.get("template") or {}}
            for rtype, rspec in ordered if isinstance(rspec, dict)]


def _with_node_selector(template: Obj, node_labels: dict[str, str]) -> Obj:
    pod_spec = dict(template.get("spec") or {})
    pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **node_labels}
    return {**template, "spec": pod_spec}


@dataclass(frozen=True)
class Integration:
    kind: str
    resource: tuple[str, str]  # (group, plural)
    suspend_path: tuple[str, ...]  # below spec
    done: tuple[str, str]  # the job's conditions meaning Succeeded, Failed
    podsets: Callable[[Obj], list[Obj]]

    @property
    def prefix(self) -> str:
        return self.kind.lower()

    def suspended(self, job: Obj) -> bool:
        value: Any = job.get("spec") or {}
        for part in self.suspend_path:
            value = (value or {}).get(part)
        return bool(value)

    def outcome(self, job: Obj) -> str | None:
        """Succeeded / Failed once the job finished, else None."""
        found = finished(job, self.done)
        return None if found is None else ("Succeeded" if found == self.done[0] else "Failed")

    def mutate(self, job: Obj) -> Obj:
        """Kueue's webhook: a job with a queue name is created suspended."""
        if not queue_name(job) or not isinstance(job.get("spec"), dict) or self.suspended(job):
            return job
        return self.with_suspend(job, True, {})

    def with_suspend(self, job: Obj, suspend: bool, node_labels: dict[str, str]) -> Obj:
        spec = dict(job.get("spec") or {})
        if len(self.suspend_path) == 1:
            spec[self.suspend_path[0]] = suspend
        else:
            outer, inner = self.suspend_path
            spec[outer] = {**(spec.get(outer) or {}), inner: suspend}
        if node_labels and self.kind == "Job":
            spec["template"] = _with_node_selector(spec.get("template") or {}, node_labels)
        elif node_labels:
            spec["pytorchReplicaSpecs"] = {
                rtype: {**rspec, "template": _with_node_selector(rspec.get("template") or {}, node_labels)}
                for rtype, rspec in (spec.get("pytorchReplicaSpecs") or {}).items()}
        return {**job, "spec": spec}


INTEGRATIONS = (
    Integration("Job", ("batch", "jobs"), ("suspend",), ("Complete", "Failed"), _job_podsets),
    Integration("PyTorchJob", ("kubeflow.org", "pytorchjobs"), ("runPolicy", "suspend"), ("Succeeded", "Failed"),
                _pytorchjob_podsets),
)
BY_KIND = {integration.kind: integration for integration in INTEGRATIONS}
