"""Kueue (kueue.x-k8s.io/v1beta1) in the simulator: quota-based admission of batch/v1 Jobs and Kubeflow PyTorchJobs,
after Kueue v0.10.

Its kinds (ResourceFlavor, ClusterQueue, LocalQueue, Workload: `crd_manifests`) are served while OpenShift AI's kueue
component is (controllers/rhoai.py: Managed in the DataScienceCluster, or preinstalled by the profile), and so is
Kueue's mutating webhook for the job kinds of kueue_jobs.py: a job created with the label
`kueue.x-k8s.io/queue-name` is stored suspended (Job `spec.suspend`, PyTorchJob `spec.runPolicy.suspend`; their
controllers then create no pods). For each such job it creates a Workload `<lowercase kind>-<name>-<5 hex>` owned by the
job (its pod sets, the queue name, the priority of
the pods' PriorityClass). A scheduling cycle (kueue_admission.schedule, pure) runs whenever a Workload, queue or
flavor changes: an admitted Workload gets `status.admission` (ClusterQueue, flavor and usage per pod set) and the
conditions QuotaReserved then Admitted (True), and its job is unsuspended with the flavor's nodeLabels in its pod
templates' nodeSelector; one that waits gets QuotaReserved False (reason Pending) once. A preempted Workload gets
Evicted and Preempted (True, reasons Preempted and InClusterQueue / InCohortReclamation), QuotaReserved / Admitted
False and Requeued True, its job is suspended again (its pods deleted) and it waits in its queue again. When the job
succeeds or fails the Workload is Finished (reason Succeeded / Failed) and its quota released. ClusterQueue and
LocalQueue statuses carry pendingWorkloads, reservingWorkloads, admittedWorkloads and the flavors' usage.

Kueue's metrics (`kueue_*`, names and wait-time buckets of v0.10, the quota gauges as with
`enableClusterQueueResources`) are kept in `self.metrics` (a prometheus CollectorRegistry) and served by the
simulator at `/metrics/kueue`; wait times are measured on the event loop's clock from the Workload's creation or
requeue. With no Kueue object and no labelled job it does nothing. Not simulated: the other integrations (RayJob,
JobSet, plain pods...), admission checks, waitForPodsReady, namespaceSelector (every namespace is selected),
stopPolicy, WorkloadPriorityClass.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from pytest_topsail.sim.controllers.base import Controller, condition, now_seconds, set_condition, stable_fraction
from pytest_topsail.sim.controllers.kueue_admission import (
    Admitted,
    Pending,
    Queue,
    cluster_queue,
    podset_requests,
    quantity,
    schedule,
    uncovered,
)
from pytest_topsail.sim.controllers.kueue_jobs import BY_KIND, INTEGRATIONS, Integration, queue_name
from pytest_topsail.sim.controllers.workload import owner_reference
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.registry.crd_schemas import openapi_schema

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta1"
# plural -> (kind, namespaced, short names)
KINDS: dict[str, tuple[str, bool, tuple[str, ...]]] = {
    "resourceflavors": ("ResourceFlavor", False, ("flavor", "flavors", "rf")),
    "clusterqueues": ("ClusterQueue", False, ("cq",)),
    "localqueues": ("LocalQueue", True, ("queue", "queues", "lq")),
    "workloads": ("Workload", True, ("wl",)),
}
CYCLE = ("cycle",)
# v0.10's wait-time buckets: 1 s, then 2.5 x 2^k s up to 10240 s
WAIT_BUCKETS = (1.0, *(2.5 * 2**k for k in range(13)))
METRICS_PATH = "/metrics/kueue"


def crd_manifests() -> list[dict[str, Any]]:
    """Kueue's four CRDs: v1beta1 served and stored, status subresource, structural schemas."""
    manifests = []
    for plural, (kind, namespaced, short) in KINDS.items():
        manifests.append({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced" if namespaced else "Cluster",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List",
                               "shortNames": list(short), "categories": ["kueue"]},
                     "versions": [{"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": openapi_schema(GROUP, kind, VERSION)}}]},
        })
    return manifests


def is_true(obj: dict[str, Any], kind: str) -> bool:
    return (condition(obj, kind) or {}).get("status") == "True"


def workload_name(job: dict[str, Any]) -> str:
    """`<lowercase kind>-<name>-<5 hex>`, the hex from the job's uid (Kueue's GetWorkloadNameForOwnerWithGVK)."""
    digest = f"{int(stable_fraction(0, job['metadata']['uid']) * 16**5):05x}"
    prefix = job["kind"].lower()
    return f"{prefix}-{job['metadata']['name'][:63 - 7 - len(prefix)]}-{digest}"


class KueueMetrics:
    """Kueue's Prometheus metrics of one simulated Kueue, in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        cq = ["cluster_queue"]
        quota = ["cohort", "cluster_queue", "flavor", "resource"]
        self.pending = Gauge("kueue_pending_workloads", "The number of pending workloads, per 'cluster_queue' and "
                             "'status'", ["cluster_queue", "status"], registry=self.registry)
        self.reserving = Gauge("kueue_reserving_active_workloads", "The number of Workloads that are reserving "
                               "quota, per 'cluster_queue'", cq, registry=self.registry)
        self.admitted_active = Gauge("kueue_admitted_active_workloads", "The number of admitted Workloads that are "
                                     "active (unsuspended and not finished), per 'cluster_queue'", cq,
                                     registry=self.registry)
        self.reserved_total = Counter("kueue_quota_reserved_workloads", "The total number of quota reserved "
                                      "workloads per 'cluster_queue'", cq, registry=self.registry)
        self.admitted_total = Counter("kueue_admitted_workloads", "The total number of admitted workloads per "
                                      "'cluster_queue'", cq, registry=self.registry)
        self.reserved_wait = Histogram("kueue_quota_reserved_wait_time_seconds", "The time between a workload was "
                                       "created or requeued until it got quota reservation, per 'cluster_queue'",
                                       cq, buckets=WAIT_BUCKETS, registry=self.registry)
        self.admission_wait = Histogram("kueue_admission_wait_time_seconds", "The time between a workload was "
                                        "created or requeued until admission, per 'cluster_queue'", cq,
                                        buckets=WAIT_BUCKETS, registry=self.registry)
        self.evicted = Counter("kueue_evicted_workloads", "The number of evicted workloads per 'cluster_queue'",
                               ["cluster_queue", "reason"], registry=self.registry)
        self.preempted = Counter("kueue_preempted_workloads", "The number of preempted workloads per "
                                 "'preempting_cluster_queue'", ["preempting_cluster_queue", "reason"],
                                 registry=self.registry)
        self.usage = Gauge("kueue_cluster_queue_resource_usage", "Reports the cluster_queue's total resource usage",
                           quota, registry=self.registry)
        self.reservation = Gauge("kueue_cluster_queue_resource_reservation", "Reports the cluster_queue's total "
                                 "resource reservation", quota, registry=self.registry)
        self.nominal = Gauge("kueue_cluster_queue_nominal_quota", "Reports the cluster_queue's resource nominal "
                             "quota", quota, registry=self.registry)
        self.borrowing = Gauge("kueue_cluster_queue_borrowing_limit", "Reports the cluster_queue's resource "
                               "borrowing limit", quota, registry=self.registry)


class KueueController(Controller):
    name = "kueue"

    def __init__(self, store: Any, profile: Any) -> None:
        super().__init__(store, profile)
        self.metrics = KueueMetrics()
        self.workloads: dict[tuple[str, str], dict[str, Any]] = {}  # the Workloads, as last committed
        self._job_workload: dict[tuple[str, str, str], tuple[str, str]] = {}  # (kind, ns, name) -> Workload key
        self._seen: dict[tuple[str, str], int] = {}  # Workload key -> commit order of its creation
        self._sequence = 0
        # the Workloads not finished, as the scheduler sees them: holding quota, or waiting (with queue name)
        self._open: dict[tuple[str, str], Admitted | tuple[str, Pending]] = {}
        self._waiting_since: dict[tuple[str, str], float] = {}  # loop time of creation / requeue
        self._admissions = 0
        self._admission_order: dict[tuple[str, str], int] = {}  # newest admitted are preempted first

    @property
    def metrics_endpoints(self) -> dict[str, Callable[[], bytes]]:
        """Served by the simulator's API server (Kueue's manager serves them on its own :8080/metrics)."""
        return {METRICS_PATH: lambda: generate_latest(self.metrics.registry)}

    async def on_start(self) -> None:
        # Kueue's kinds and PyTorchJob's are served only while their components are (rhoai.py): watch by key, look
        # the types up when needed
        self._webhooks = [(integration.resource, functools.partial(self._webhook, integration))
                          for integration in INTEGRATIONS]
        for integration, (key, webhook) in zip(INTEGRATIONS, self._webhooks, strict=True):
            self.store.add_create_mutator(key, webhook)
            self.watch_key(integration.resource, functools.partial(self._on_job, integration.kind))
        self.watch_key((GROUP, "workloads"), self._on_workload)
        for plural in ("clusterqueues", "localqueues", "resourceflavors"):
            self.watch_key((GROUP, plural), lambda _event, _obj: self.enqueue(CYCLE))

    async def stop(self) -> None:
        for key, webhook in getattr(self, "_webhooks", ()):
            self.store.remove_create_mutator(key, webhook)
        await super().stop()

    @property
    def types(self) -> dict[str, Any]:
        """Kueue's resource types by plural; a 404 ApiError while Kueue is not served (ends a reconcile quietly)."""
        return {plural: self.store.resource_type(plural, GROUP) for plural in KINDS}

    def _webhook(self, integration: Integration, job: dict[str, Any]) -> dict[str, Any]:
        """Kueue's mutating webhook, there only while Kueue is served."""
        try:
            self.store.resource_type("workloads", GROUP)
        except ApiError:
            return job
        return integration.mutate(job)

    # events (synchronous, inside the store's commit: look and enqueue only) -----------------------------------
    def _on_job(self, kind: str, event_type: str, job: dict[str, Any]) -> None:
        if event_type != "DELETED" and queue_name(job):
            self.enqueue((kind, *_key(job)))

    def _on_workload(self, event_type: str, workload: dict[str, Any]) -> None:
        key = _key(workload)
        job = _owner_job(workload)
        if event_type == "DELETED":
            self.workloads.pop(key, None)
            self._waiting_since.pop(key, None)
            self._admission_order.pop(key, None)
            self._seen.pop(key, None)
            self._open.pop(key, None)
            if job is not None:
                self._job_workload.pop(job, None)
        else:
            if key not in self.workloads:
                self._sequence += 1
                self._seen[key] = self._sequence
                self._waiting_since[key] = asyncio.get_running_loop().time()
            self.workloads[key] = workload
            self._classify(key, workload)
            if job is not None:
                self._job_workload[job] = key
                self.enqueue(job)
        self.enqueue(CYCLE)

    # work ------------------------------------------------------------------------------------------------------
    async def reconcile(self, key: Hashable) -> None:
        if key == CYCLE:
            self._cycle()
            return
        kind, namespace, name = cast(tuple[str, str, str], key)
        integration = BY_KIND[kind]
        job = self.store.find(self.store.resource_type(integration.resource[1], integration.resource[0]), namespace,
                              name)
        if job is not None and queue_name(job) and not job["metadata"].get("deletionTimestamp"):
            self._reconcile_job(integration, job)

    def _reconcile_job(self, integration: Integration, job: dict[str, Any]) -> None:
        workload = self.workloads.get(self._job_workload.get((integration.kind, *_key(job)), ("", "")))
        outcome = integration.outcome(job)
        if workload is None:
            if outcome is None:
                self._create_workload(integration, job)
            return
        if outcome is not None:
            if not is_true(workload, "Finished"):
                self._set_conditions(workload, [("Finished", "True", outcome, f"Job finished: {outcome}")])
            return
        suspend = not is_true(workload, "Admitted")
        if integration.suspended(job) != suspend:
            self._set_suspend(integration, job, workload, suspend)

    def _create_workload(self, integration: Integration, job: dict[str, Any]) -> None:
        podsets = integration.podsets(job)
        priority_class = next((p["template"].get("spec", {}).get("priorityClassName") for p in podsets
                               if p["template"].get("spec", {}).get("priorityClassName")), None)
        workload_spec: dict[str, Any] = {
            "podSets": podsets, "queueName": queue_name(job), "priority": self._priority(priority_class),
            "active": True}
        if priority_class:
            workload_spec.update(priorityClassName=priority_class,
                                 priorityClassSource="scheduling.k8s.io/priorityclass")
        metadata = {"name": workload_name(job), "namespace": job["metadata"]["namespace"],
                    "labels": {"kueue.x-k8s.io/job-uid": job["metadata"]["uid"]},
                    "ownerReferences": [owner_reference(job)]}
        try:
            self.store.create(self.types["workloads"], {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workload",
                                                        "metadata": metadata, "spec": workload_spec})
        except ApiError as exc:
            if exc.reason != "AlreadyExists":
                raise
        self.store.record_event(job, "CreatedWorkload", f"Created Workload: {metadata['namespace']}/"
                                f"{metadata['name']}", source="kueue-admission")

    def _priority(self, priority_class: str | None) -> int:
        if not priority_class:
            return 0
        found = self.store.find(self.store.resource_type("priorityclasses", "scheduling.k8s.io"), None,
                                priority_class)
        return int((found or {}).get("value", 0))

    def _set_suspend(self, integration: Integration, job: dict[str, Any], workload: dict[str, Any],
                     suspend: bool) -> None:
        node_labels: dict[str, str] = {}
        if not suspend:  # the admitted flavors' node labels go into the pods' nodeSelector
            for assignment in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ():
                for flavor in set((assignment.get("flavors") or {}).values()):
                    found = self.store.find(self.types["resourceflavors"], None, flavor)
                    node_labels.update(((found or {}).get("spec") or {}).get("nodeLabels") or {})
        jobs = self.store.resource_type(integration.resource[1], integration.resource[0])
        self.store.update(jobs, integration.with_suspend(job, suspend, node_labels))

    # the scheduling cycle --------------------------------------------------------------------------------------
    def _cycle(self) -> None:
        queues = {cq["metadata"]["name"]: cluster_queue(cq) for cq in self.store.list(self.types["clusterqueues"])}
        local = {(lq["metadata"]["namespace"], lq["metadata"]["name"]): (lq.get("spec") or {}).get("clusterQueue")
                 for lq in self.store.list(self.types["localqueues"])}
        pending: list[Pending] = []
        admitted: list[Admitted] = []
        for key, entry in self._open.items():
            if isinstance(entry, Admitted):
                admitted.append(entry)
                continue
            target = local.get((key[0], entry[0]))
            if target is not None and target in queues:
                pending.append(replace(entry[1], queue=target))
        decision = schedule(queues, pending, admitted)
        for victim, reason, preemptor in decision.preempt:
            self._evict(victim, reason, preemptor)
        admitted_now = set()
        for candidate, flavors in decision.admit:
            self._admit(candidate, flavors)
            admitted_now.add(candidate.key)
        for candidate in pending:
            if candidate.key not in admitted_now:
                self._mark_pending(candidate, queues[candidate.queue])
        self._publish(queues, local)

    def _classify(self, key: tuple[str, str], workload: dict[str, Any]) -> None:
        """Keep the scheduler's view of one Workload (computed once per change, not at every cycle)."""
        if is_true(workload, "Finished"):
            self._open.pop(key, None)
        elif is_true(workload, "QuotaReserved"):
            self._open[key] = self._admitted(key, workload)
        else:
            order = (workload["metadata"].get("creationTimestamp") or "", self._seen.get(key, 0))
            self._open[key] = ((workload.get("spec") or {}).get("queueName") or "",
                               Pending(key, "", _priority(workload), order, podset_requests(workload)))

    def _admitted(self, key: tuple[str, str], workload: dict[str, Any]) -> Admitted:
        admission = (workload.get("status") or {}).get("admission") or {}
        usage: dict[tuple[str, str], float] = {}
        for assignment in admission.get("podSetAssignments") or ():
            for resource, amount in (assignment.get("resourceUsage") or {}).items():
                flavor = (assignment.get("flavors") or {}).get(resource, "")
                usage[(flavor, resource)] = usage.get((flavor, resource), 0.0) + quantity(amount)
        order = self._admission_order.get(key, 0)
        return Admitted(key, admission.get("clusterQueue") or "", _priority(workload), ("", order), usage)

    def _admit(self, candidate: Pending, flavors: dict[str, str]) -> None:
        workload = self.workloads[candidate.key]
        self._admissions += 1
        assignments = []
        for podset in (workload.get("spec") or {}).get("podSets") or ():
            requests = podset_requests({"spec": {"podSets": [podset]}})
            assignments.append({"name": podset["name"], "count": podset.get("count", 1),
                                "flavors": {r: flavors[r] for r in requests},
                                "resourceUsage": {r: _format(v) for r, v in requests.items()}})
        now = now_seconds()
        conditions = list((workload.get("status") or {}).get("conditions") or ())
        for kind, value, reason, message in [
                ("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {candidate.queue}"),
                ("Admitted", "True", "Admitted", "The workload is admitted")]:
            conditions = set_condition(conditions, _condition(kind, value, reason, message, now))
        for kind in ("Evicted", "Preempted"):
            previous = condition(workload, kind)
            if previous is not None:
                conditions = set_condition(conditions, _condition(
                    kind, "False", "QuotaReserved", f"Previously: {previous.get('message', '')}", now))
        status = {**(workload.get("status") or {}), "conditions": conditions,
                  "admission": {"clusterQueue": candidate.queue, "podSetAssignments": assignments}}
        self._admission_order[candidate.key] = self._admissions
        self.store.update(self.types["workloads"], {**workload, "status": status}, subresource="status")
        waited = asyncio.get_running_loop().time() - self._waiting_since.get(candidate.key, 0.0)
        for metric in (self.metrics.reserved_wait, self.metrics.admission_wait):
            metric.labels(candidate.queue).observe(waited)
        self.metrics.reserved_total.labels(candidate.queue).inc()
        self.metrics.admitted_total.labels(candidate.queue).inc()
        self.store.record_event(workload, "QuotaReserved", f"Quota reserved in ClusterQueue {candidate.queue}, wait "
                                f"time since queued was {waited:.0f}s", source="kueue-admission")
        self.store.record_event(workload, "Admitted", f"Admitted by ClusterQueue {candidate.queue}",
                                source="kueue-admission")

    def _evict(self, victim: Admitted, reason: str, preemptor: Pending) -> None:
        workload = self.workloads.get(victim.key)
        if workload is None:
            return
        cause = "prioritization in the ClusterQueue" if reason == "InClusterQueue" else "reclamation within the cohort"
        preemptor_uid = self.workloads[preemptor.key]["metadata"]["uid"]
        message = f"Preempted to accommodate a workload (UID: {preemptor_uid}) due to {cause}"
        status = {k: v for k, v in (workload.get("status") or {}).items() if k != "admission"}
        status["conditions"] = (workload.get("status") or {}).get("conditions") or []
        self._set_conditions({**workload, "status": status}, [
            ("Evicted", "True", "Preempted", message), ("Preempted", "True", reason, message),
            ("QuotaReserved", "False", "Preempted", message), ("Admitted", "False", "Preempted", message),
            ("Requeued", "True", "Preempted", message)])
        self._waiting_since[victim.key] = asyncio.get_running_loop().time()
        self.metrics.evicted.labels(victim.queue, "Preempted").inc()
        self.metrics.preempted.labels(preemptor.queue, reason).inc()
        self.store.record_event(workload, "Preempted", message, source="kueue-admission")

    def _mark_pending(self, candidate: Pending, queue: Queue) -> None:
        """QuotaReserved False with Kueue's message, once (not rewritten at every cycle)."""
        workload = self.workloads[candidate.key]
        if condition(workload, "QuotaReserved") is not None:
            return
        missing = uncovered(queue, candidate.requests)
        why = (f"resource {', '.join(missing)} unavailable in ClusterQueue" if missing
               else f"insufficient unused quota in ClusterQueue {candidate.queue}")
        self._set_conditions(workload, [("QuotaReserved", "False", "Pending",
                                         f"couldn't assign flavors to pod set main: {why}")])

    def _set_conditions(self, workload: dict[str, Any], changes: list[tuple[str, str, str, str]]) -> None:
        now = now_seconds()
        status = dict(workload.get("status") or {})
        conditions = list(status.get("conditions") or ())
        for kind, value, reason, message in changes:
            conditions = set_condition(conditions, _condition(kind, value, reason, message, now))
        status["conditions"] = conditions
        self.store.update(self.types["workloads"], {**workload, "status": status}, subresource="status")

    # queue statuses and gauges ---------------------------------------------------------------------------------
    def _publish(self, queues: dict[str, Queue], local: dict[tuple[str, str], str | None]) -> None:
        counts = {name: {"pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0} for name in queues}
        local_counts = {key: {"pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0}
                        for key in local}
        usage: dict[str, dict[tuple[str, str], float]] = {name: {} for name in queues}
        for key, entry in self._open.items():
            if isinstance(entry, Admitted):
                lq = (key[0], (self.workloads[key].get("spec") or {}).get("queueName") or "")
                kinds = ["reservingWorkloads", "admittedWorkloads"]
                for flavor_resource, amount in entry.usage.items():
                    used = usage.setdefault(entry.queue, {})
                    used[flavor_resource] = used.get(flavor_resource, 0.0) + amount
                cq = entry.queue
            else:
                lq = (key[0], entry[0])
                kinds = ["pendingWorkloads"]
                cq = local.get(lq) or ""
            for kind in kinds:
                if cq in counts:
                    counts[cq][kind] += 1
                if lq in local_counts:
                    local_counts[lq][kind] += 1
        for name, queue in queues.items():
            self._write_queue_status("clusterqueues", None, name, counts[name], queue, usage.get(name, {}))
            self._gauges(queue, counts[name], usage.get(name, {}))
        for (namespace, name), values in local_counts.items():
            self._write_queue_status("localqueues", namespace, name, values, None, {})

    def _write_queue_status(self, plural: str, namespace: str | None, name: str, values: dict[str, int],
                            queue: Queue | None, usage: dict[tuple[str, str], float]) -> None:
        obj = self.store.find(self.types[plural], namespace, name)
        if obj is None:
            return
        status: dict[str, Any] = {**(obj.get("status") or {}), **values}
        if queue is not None:
            flavors = [{"name": flavor, "resources": [
                {"name": r, "total": _format(usage.get((flavor, r), 0.0)),
                 "borrowed": _format(max(0.0, usage.get((flavor, r), 0.0) - queue.nominal.get((flavor, r), 0.0)))}
                for r in covered]} for flavor, covered in queue.flavors]
            status["flavorsReservation"] = status["flavorsUsage"] = flavors
        status["conditions"] = set_condition(list(status.get("conditions") or ()), _condition(
            "Active", "True", "Ready", "Can admit new workloads", now_seconds()))
        if status != (obj.get("status") or {}):
            self.store.update(self.types[plural], {**obj, "status": status}, subresource="status")

    def _gauges(self, queue: Queue, counts: dict[str, int], usage: dict[tuple[str, str], float]) -> None:
        metrics = self.metrics
        metrics.pending.labels(queue.name, "active").set(counts["pendingWorkloads"])
        metrics.pending.labels(queue.name, "inadmissible").set(0)
        metrics.reserving.labels(queue.name).set(counts["reservingWorkloads"])
        metrics.admitted_active.labels(queue.name).set(counts["admittedWorkloads"])
        for (flavor, resource), nominal in queue.nominal.items():
            labels = (queue.cohort or "", queue.name, flavor, resource)
            metrics.usage.labels(*labels).set(usage.get((flavor, resource), 0.0))
            metrics.reservation.labels(*labels).set(usage.get((flavor, resource), 0.0))
            metrics.nominal.labels(*labels).set(nominal)
            limit = queue.borrowing_limit.get((flavor, resource))
            if limit is not None:
                metrics.borrowing.labels(*labels).set(limit)


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


def _owner_job(workload: dict[str, Any]) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of the job that owns the Workload."""
    for ref in workload["metadata"].get("ownerReferences") or ():
        if ref.get("kind") in BY_KIND and ref.get("controller"):
            return (ref["kind"], workload["metadata"].get("namespace") or "", ref["name"])
    return None


def _priority(workload: dict[str, Any]) -> int:
    return int((workload.get("spec") or {}).get("priority") or 0)


def _condition(kind: str, status: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": now}


def _format(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"
