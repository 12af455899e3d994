"""Kueue queueing in a scale case: the case's `queue:` settings, the Kueue objects they make, the Workloads watched
while the jobs run, and the queue's KPIs.

- `QueueSettings`: ClusterQueues (nominal GPUs, borrowing limit, cohort, queueing strategy, preemption), teams (one
  namespace each, with a LocalQueue named `queue` pointing at the team's ClusterQueue and a PriorityClass of the
  team's priority). Cluster-scoped names get the run id (`<name>-<run id>`) so that concurrent runs never share one.
- `queue_objects` makes the ResourceFlavor, ClusterQueues, PriorityClasses and LocalQueues; `queue_jobs` labels each
  job `kueue.x-k8s.io/queue-name` and gives its pods the team's PriorityClass (teams take the jobs in turn).
- `WorkloadWatch` watches `kueue.x-k8s.io/v1beta1` Workloads of the run's namespaces and records, on the client's
  clock (epoch ms, as the submit times), when each was first seen, every interval it held quota (QuotaReserved True
  until evicted or Finished), when it was first Admitted and Finished, and its evictions.
- `analyse_queues` turns those records and the jobs' timelines into the KPIs: per ClusterQueue and per priority the
  quantiles of submission -> QuotaReserved, QuotaReserved -> Admitted, Admitted -> Running (the job's Ready), Running
  -> Finished; preemptions; quota utilisation (GPU-seconds held over nominal GPUs x the run's span); per team the
  share of admitted GPU-seconds against its share of the nominal quota; `pending_series` the pending depth over time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic

from pytest_topsail.conditions import find_condition
from pytest_topsail.errors import TopsailError
from pytest_topsail.kube.client import Kube, KubeError, ObjectRef, WatchStop
from pytest_topsail.scale.latency import nearest_rank
from pytest_topsail.scale.timelines import Timeline

API_VERSION = "kueue.x-k8s.io/v1beta1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
LOCAL_QUEUE = "queue"
QUEUE_STEPS = ("QuotaReserved", "Admitted", "Running", "Finished")  # each measured from the step before
QUANTILES = {"P50": 50.0, "P95": 95.0, "P99": 99.0}


class ClusterQueueSpec(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    name: str = pydantic.Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$")
    gpus: int = pydantic.Field(ge=0)  # nominal quota of nvidia.com/gpu
    # Kueue admits only what its queue covers: the jobs' cpu and memory requests get this (ample) quota
    cpu: str = "1000"
    memory: str = "4Ti"
    borrowing_limit: int | None = pydantic.Field(None, ge=0)  # None: unlimited within the cohort
    cohort: str | None = None
    strategy: Literal["StrictFIFO", "BestEffortFIFO"] = "BestEffortFIFO"
    preemption: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "Never"  # withinClusterQueue
    reclaim: Literal["Never", "LowerPriority", "Any"] = "Never"  # reclaimWithinCohort

    @pydantic.model_validator(mode="after")
    def borrowing_needs_a_cohort(self) -> ClusterQueueSpec:
        if self.borrowing_limit is not None and self.cohort is None:
            raise ValueError(f"cluster queue {self.name}: borrowing_limit needs a cohort (Kueue rejects it)")
        return self


class TeamSpec(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    name: str = pydantic.Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$")
    cluster_queue: str
    priority: int = 0


class QueueSettings(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    flavor: str = "default-flavor"
    cluster_queues: list[ClusterQueueSpec] = pydantic.Field(min_length=1)
    teams: list[TeamSpec] = pydantic.Field(min_length=1)

    @pydantic.model_validator(mode="after")
    def teams_name_queues(self) -> QueueSettings:
        names = [cq.name for cq in self.cluster_queues]
        for team in self.teams:
            if team.cluster_queue not in names:
                raise ValueError(f"team {team.name}: cluster_queue {team.cluster_queue!r} is none of {names}")
        if len({team.name for team in self.teams}) < len(self.teams):
            raise ValueError("team names repeat")
        return self

    def queue_of(self, team: str) -> ClusterQueueSpec:
        wanted = next(t.cluster_queue for t in self.teams if t.name == team)
        return next(cq for cq in self.cluster_queues if cq.name == wanted)


def run_name(name: str, run_id: str) -> str:
    return f"{name}-{run_id}"


def queue_objects(settings: QueueSettings, run_id: str, namespaces: list[str]) -> list[dict[str, Any]]:
    """Flavor, ClusterQueues, PriorityClasses, then a LocalQueue in each team's namespace (teams[i] in
    namespaces[i]), in creation order."""
    flavor = run_name(settings.flavor, run_id)
    objects: list[dict[str, Any]] = [{"apiVersion": API_VERSION, "kind": "ResourceFlavor",
                                      "metadata": {"name": flavor}, "spec": {}}]
    for cq in settings.cluster_queues:
        gpu: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": cq.gpus}
        if cq.borrowing_limit is not None:
            gpu["borrowingLimit"] = cq.borrowing_limit
        resources = [{"name": "cpu", "nominalQuota": cq.cpu}, {"name": "memory", "nominalQuota": cq.memory}, gpu]
        spec: dict[str, Any] = {
            "namespaceSelector": {}, "queueingStrategy": cq.strategy,
            "preemption": {"withinClusterQueue": cq.preemption, "reclaimWithinCohort": cq.reclaim},
            "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                                "flavors": [{"name": flavor, "resources": resources}]}]}
        if cq.cohort:
            spec["cohort"] = run_name(cq.cohort, run_id)
        objects.append({"apiVersion": API_VERSION, "kind": "ClusterQueue",
                        "metadata": {"name": run_name(cq.name, run_id)}, "spec": spec})
    for team in settings.teams:
        objects.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": run_name(team.name, run_id)}, "value": team.priority,
                        "description": f"scale run {run_id}, team {team.name}"})
    for team, namespace in zip(settings.teams, namespaces, strict=True):
        objects.append({"apiVersion": API_VERSION, "kind": "LocalQueue",
                        "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
                        "spec": {"clusterQueue": run_name(team.cluster_queue, run_id)}})
    return objects


def create_queue_objects(api: Kube, settings: QueueSettings, run_id: str, namespaces: list[str],
                         created: list[ObjectRef]) -> None:
    """Create the queue's objects, each appended to `created` once it exists (for `delete_queue_objects`, even when
    a later one fails). A cluster without Kueue's CRDs is a TopsailError naming what to install."""
    if not api.has_kind(API_VERSION, "ClusterQueue"):
        raise TopsailError(f"the case has queue settings but the cluster serves no {API_VERSION} ClusterQueue: "
                           "install Kueue (OpenShift AI: the DataScienceCluster's kueue component; docs/scale.md)")
    for manifest in queue_objects(settings, run_id, namespaces):
        api.create(manifest, lost_answer_ok=True)
        created.append(ObjectRef.of(manifest))


def delete_queue_objects(api: Kube, refs: list[ObjectRef]) -> None:
    """Delete the cluster-scoped ones (the LocalQueues go with their namespaces)."""
    for ref in reversed(refs):
        if ref.namespace is None:
            api.delete(ref)


def queue_job(objects: list[dict[str, Any]], team: TeamSpec, run_id: str) -> None:
    """Label the job (the last object: a Job or a PyTorchJob) for the team's LocalQueue and give its pods the team's
    PriorityClass."""
    job = objects[-1]
    job["metadata"]["labels"][QUEUE_LABEL] = LOCAL_QUEUE
    spec = job["spec"]
    templates = [spec["template"]] if "template" in spec else [
        replica["template"] for replica in spec["pytorchReplicaSpecs"].values()]
    for template in templates:
        template["spec"] = {**template["spec"], "priorityClassName": run_name(team.name, run_id)}


@dataclass
class WorkloadRecord:
    namespace: str
    job: str
    created_ms: float
    cluster_queue: str = ""
    priority: int = 0
    gpus: float = 0.0
    held: list[list[float | None]] = field(default_factory=list)  # [quota reserved at, released at | None]
    admitted_ms: float | None = None
    finished_ms: float | None = None
    evictions: int = 0

    def quota_reserved_ms(self) -> float | None:
        return self.held[0][0] if self.held else None


class WorkloadWatch:
    """Watches the Workloads of the run's namespaces in a thread (see the module's docstring)."""

    def __init__(self, api: Kube, namespaces: list[str], clock: Any = None) -> None:
        import time

        self.api = api
        self.namespaces = set(namespaces)
        self.clock = clock or time.time
        self.records: dict[str, WorkloadRecord] = {}
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.stop_event = WatchStop()
        self.thread: threading.Thread | None = None

    def start(self, timeout_s: float = 15.0) -> None:
        listed = threading.Event()

        def run() -> None:
            try:
                for event_type, obj in self.api.watch(API_VERSION, "Workload", stop=self.stop_event,
                                                      on_listed=listed.set,
                                                      on_error=lambda exc: self.errors.append(str(exc))):
                    self.on_event(event_type, obj)
            except KubeError as exc:
                self.errors.append(str(exc))
                listed.set()

        self.thread = threading.Thread(target=run, name="scale-workloads", daemon=True)
        self.thread.start()
        listed.wait(timeout_s)

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(5.0)

    def on_event(self, event_type: str, obj: dict[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        if metadata.get("namespace") not in self.namespaces or event_type == "DELETED":
            return
        now = round(self.clock() * 1000.0, 3)
        owner = next((ref["name"] for ref in metadata.get("ownerReferences") or () if ref.get("controller")), "")
        key = f"{metadata['namespace']}/{owner}"
        with self.lock:
            record = self.records.setdefault(key, WorkloadRecord(metadata["namespace"], owner, now))
            update_record(record, obj, now)

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return [vars(record) | {"held": [list(h) for h in record.held]} for record in self.records.values()]


def is_true(obj: dict[str, Any], kind: str) -> bool:
    return (find_condition(obj, kind) or {}).get("status") == "True"


def update_record(record: WorkloadRecord, obj: dict[str, Any], now: float) -> None:
    """The record after one observed version of its Workload."""
    record.priority = int((obj.get("spec") or {}).get("priority") or 0)
    admission = (obj.get("status") or {}).get("admission") or {}
    holding = is_true(obj, "QuotaReserved") and not is_true(obj, "Finished")
    was_holding = bool(record.held) and record.held[-1][1] is None
    if holding and not was_holding:
        record.held.append([now, None])
        record.cluster_queue = admission.get("clusterQueue") or record.cluster_queue
        record.gpus = sum(float(a.get("resourceUsage", {}).get("nvidia.com/gpu", 0))
                          for a in admission.get("podSetAssignments") or ())
    elif was_holding and not holding:
        record.held[-1][1] = now
        if is_true(obj, "Evicted"):
            record.evictions += 1
    if record.admitted_ms is None and is_true(obj, "Admitted"):
        record.admitted_ms = now
    if record.finished_ms is None and is_true(obj, "Finished"):
        record.finished_ms = now


def quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}
    result = {name: nearest_rank(ordered, percent) for name, percent in QUANTILES.items()}
    result["max"] = ordered[-1]
    result["avg"] = round(sum(ordered) / len(ordered), 3)
    result["count"] = float(len(ordered))
    return result


def step_delays(record: dict[str, Any], job: dict[str, Any] | None) -> dict[str, float | None]:
    """Each queue step's delay (ms) from the step before; `job`: the job's submit_ms and Ready/Completed times."""
    submit = (job or {}).get("submit_ms")
    reserved = record["held"][0][0] if record["held"] else None
    running = (job or {}).get("Ready")
    finished = record.get("finished_ms") or (job or {}).get("Completed")
    points = [submit, reserved, record.get("admitted_ms"), running, finished]
    return {step: (None if a is None or b is None else round(max(b - a, 0.0), 3))
            for step, a, b in zip(QUEUE_STEPS, points, points[1:], strict=False)}


def sampled_queue(settings: QueueSettings, run_id: str, namespaces: list[str],
                  watch: WorkloadWatch) -> dict[str, Any]:
    """What `analyse_queues` needs, saved in sampled.json under "queue" (a run is analysed again from disk)."""
    return {"settings": settings.model_dump(), "run_id": run_id, "namespaces": namespaces,
            "workloads": watch.snapshot(), "errors": watch.errors}


def job_times(timelines: list[Timeline]) -> dict[str, dict[str, Any]]:
    """"<namespace>/<job>" -> {submit_ms, Ready, Completed} (watch times, epoch ms) of the jobs' timelines."""
    return {f"{t.namespace}/{t.key}": {"submit_ms": t.base.get("watch"), "Ready": t.times["watch"].get("Ready"),
                                       "Completed": t.times["watch"].get("Completed")} for t in timelines}


def analyse_queues(sampled: dict[str, Any], jobs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The queue KPIs (see the module's docstring) from `sampled_queue`'s document. `jobs`: "<namespace>/<job>" ->
    {submit_ms, Ready, Completed} (epoch ms)."""
    settings = QueueSettings.model_validate(sampled["settings"])
    run_id, records = sampled["run_id"], sampled["workloads"]
    team_of = {namespace: team.name for team, namespace in zip(settings.teams, sampled["namespaces"], strict=True)}
    groups: dict[str, dict[str, list[float]]] = {}
    for record in records:
        delays = step_delays(record, jobs.get(f"{record['namespace']}/{record['job']}"))
        cq = record["cluster_queue"] or "?"
        for group in (f"cluster_queue={cq}", f"priority={record['priority']}", "all"):
            for step, delay in delays.items():
                if delay is not None:
                    groups.setdefault(group, {}).setdefault(step, []).append(delay)
    start = min((job["submit_ms"] for job in jobs.values() if job.get("submit_ms") is not None), default=0.0)
    end = max([start, *(h[1] for r in records for h in r["held"] if h[1] is not None)])
    span_s = max(end - start, 1.0) / 1000.0
    held_s: dict[str, float] = {}
    for record in records:
        seconds = sum(((h[1] if h[1] is not None else end) - h[0]) for h in record["held"]) / 1000.0
        held_s[record["cluster_queue"]] = held_s.get(record["cluster_queue"], 0.0) + seconds * record["gpus"]
    nominal = {run_name(cq.name, run_id): cq.gpus for cq in settings.cluster_queues}
    total_nominal = sum(nominal.values()) or 1
    utilisation = {cq: round(100.0 * held_s.get(cq, 0.0) / max(gpus * span_s, 1e-9), 2) if gpus else None
                   for cq, gpus in nominal.items()}
    total_held = sum(held_s.values()) or 1e-9
    fairness = {}
    for team in settings.teams:
        cq = run_name(team.cluster_queue, run_id)
        sharing = sum(1 for t in settings.teams if t.cluster_queue == team.cluster_queue)
        team_held = sum(((h[1] if h[1] is not None else end) - h[0]) / 1000.0 * r["gpus"]
                        for r in records for h in r["held"] if team_of.get(r["namespace"]) == team.name)
        quota_share = nominal[cq] / sharing / total_nominal
        admitted_share = team_held / total_held
        fairness[team.name] = {"admitted_gpu_s": round(team_held, 3), "admitted_share": round(admitted_share, 4),
                               "quota_share": round(quota_share, 4),
                               "ratio": round(admitted_share / quota_share, 4) if quota_share else None}
    ratios = [f["ratio"] for f in fairness.values() if f["ratio"] is not None]
    return {
        "workloads": len(records),
        "latency_ms": {group: {step: quantiles(values) for step, values in steps.items()}
                       for group, steps in sorted(groups.items())},
        "preemptions": sum(r["evictions"] for r in records),
        "span_s": round(span_s, 3),
        "quota_utilisation_pct": utilisation,
        "total_quota_utilisation_pct": round(100.0 * sum(held_s.values()) / (total_nominal * span_s), 2),
        "fairness": fairness,
        "fairness_min_ratio": min(ratios) if ratios else None,
        "pending": pending_series(records, start),
    }


def pending_series(records: list[dict[str, Any]], start_ms: float) -> dict[str, list[list[float]]]:
    """Per ClusterQueue: [[seconds since the first submission, workloads pending]] at each change. A workload is
    pending from its creation to its first quota reservation, and from each eviction to the next one."""
    changes: dict[str, list[tuple[float, int]]] = {}
    for record in records:
        steps = changes.setdefault(record["cluster_queue"] or "?", [])
        pending_from: float | None = record["created_ms"]
        for held_from, held_to in record["held"]:
            if pending_from is not None:
                steps += [(pending_from, 1), (held_from, -1)]
            pending_from = held_to
        if pending_from is not None and not (record["held"] and record.get("finished_ms") is not None):
            steps.append((pending_from, 1))
    series = {}
    for cq, steps in changes.items():
        depth, points = 0, []
        for when, delta in sorted(steps):
            depth += delta
            points.append([round((when - start_ms) / 1000.0, 3), float(depth)])
        series[cq] = points
    return series


def queue_figure(analysis: dict[str, Any]) -> Any:
    """Pending workloads over time, one line per ClusterQueue (as the lifecycle figures, plotly)."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for cq, points in sorted(analysis["pending"].items()):
        figure.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines",
                                    line_shape="hv", name=cq))
    figure.update_layout(title="Pending workloads per ClusterQueue", xaxis_title="seconds since the first "
                         "submission", yaxis_title="pending workloads", template="plotly_white")
    return figure
