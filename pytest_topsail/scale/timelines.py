"""Per-job and per-pod timelines built from ``submitted.json`` and ``sampled.json`` (live or re-read from disk).

Job steps (a job with several pods reaches a pod step when its last pod does):
  Created      the workload object (Job / PyTorchJob / Deployment) exists
  PodsCreated  all its pods exist
  Scheduled    all its pods are bound to a node
  Initialized  all its pods have Initialized=True
  Started      all containers of all its pods have started
  Ready        all its pods have Ready=True
  Completed    the workload finished (Job Complete, PyTorchJob Succeeded); only for jobs that are expected to end

Two sources, each with its own base (see docs/scale.md):
  watch   client clock: base = submit time (before the create request); step = first watch event showing it.
  object  cluster clock: base = the workload's creationTimestamp; step = the timestamp written in the object.

A configured lifecycle (pytest_topsail.scale.lifecycle) gives one timeline per sampled object: both sources, and
``lifecycle``, each step's time as the lifecycle reports it (its ``time``: transition or observed); its deltas are
between consecutive steps (``transitions``), written to ``lifecycle_<name>.csv``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_topsail.scale.lifecycle import Lifecycle, parse_ts
from pytest_topsail.scale.workloads import JOB_LABEL

JOB_STEPS = ("Created", "PodsCreated", "Scheduled", "Initialized", "Started", "Ready", "Completed")
POD_STEPS = ("Scheduled", "Initialized", "Started", "Ready")
SOURCES = ("watch", "object")
# The object source measures from the workload's creationTimestamp: its Created delta is 0 by construction.
SOURCE_STEPS = {"watch": JOB_STEPS, "object": JOB_STEPS[1:]}
POD_STEP_KEYS = {"Scheduled": "scheduled", "Initialized": "initialized", "Started": "started", "Ready": "ready"}


@dataclass
class Timeline:
    """Absolute epoch-ms times of one job (or pod), per source and step. ``None``: not reached (or not seen)."""

    key: str
    index: int
    namespace: str
    base: dict[str, float | None]
    times: dict[str, dict[str, float | None]]
    applicable: tuple[str, ...]
    pods: int = 0
    failed: bool = False
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def delta(self, source: str, step: str) -> float | None:
        base = self.base.get(source)
        value = self.times.get(source, {}).get(step)
        if base is None or value is None:
            return None
        return round(value - base, 3)

    def between(self, source: str, first: str, second: str) -> float | None:
        """From step `first` to step `second` (ms); None if either was not reached (or not seen)."""
        start, end = self.times.get(source, {}).get(first), self.times.get(source, {}).get(second)
        return None if start is None or end is None else round(end - start, 3)


def latest(values: list[float | None]) -> float | None:
    """The time a group reached a step: its last member's time; None if any member has not reached it."""
    if not values or any(v is None for v in values):
        return None
    return max(v for v in values if v is not None)


def scheduled_event_times(events: list[dict[str, Any]]) -> dict[str, float]:
    """namespace/pod -> time of the Scheduled event (eventTime, microseconds; else firstTimestamp)."""
    times: dict[str, float] = {}
    for event in events:
        if event.get("reason") != "Scheduled":
            continue
        ts = parse_ts(event.get("eventTime")) or parse_ts(event.get("firstTimestamp"))
        key = f"{event.get('namespace')}/{event.get('pod')}"
        if ts is not None and key not in times:
            times[key] = ts
    return times


def on_grid_of(event_ms: float, created_ms: float | None) -> float:
    """The Scheduled event's time on the precision of the creationTimestamp it is compared with.

    eventTime has microseconds; a real API server writes creationTimestamp in whole seconds. Kept as is, a pod created
    at 10:00:00.900 (stamped 10:00:00) and scheduled at 10:00:00.950 would show 950 ms. Flooring the event time to
    whole seconds when the creationTimestamp is whole keeps every object-source delta on one 1 s grid (kube-burner
    does not floor; its schedulingLatency carries this bias).
    """
    if created_ms is not None and created_ms % 1000.0 == 0.0:
        return math.floor(event_ms / 1000.0) * 1000.0
    return event_ms


def pod_step_time(pod: dict[str, Any], step: str, source: str, event_times: dict[str, float]) -> float | None:
    if step == "scheduled" and source == "object":
        metadata = pod["object"].get("metadata", {})
        event_ts = event_times.get(f"{metadata.get('namespace')}/{metadata.get('name')}")
        if event_ts is not None:
            return on_grid_of(event_ts, (pod["steps"].get("created") or {}).get("object"))
    return (pod["steps"].get(step) or {}).get(source)


def job_timelines(submitted: dict[str, Any], sampled: dict[str, Any]) -> list[Timeline]:
    """One timeline per submitted job, in submission index order."""
    workloads = {
        f"{w['object']['metadata'].get('namespace')}/{w['object']['metadata'].get('name')}": w
        for w in sampled.get("workloads", [])
    }
    pods_by_job: dict[str, list[dict[str, Any]]] = {}
    for pod in sampled.get("pods", []):
        metadata = pod["object"].get("metadata", {})
        job = (metadata.get("labels") or {}).get(JOB_LABEL)
        pods_by_job.setdefault(f"{metadata.get('namespace')}/{job}", []).append(pod)
    event_times = scheduled_event_times(sampled.get("events", []))

    timelines = []
    for record in sorted(submitted.get("jobs", []), key=lambda r: r["index"]):
        key = f"{record['jobNamespace']}/{record['jobName']}"
        workload = workloads.get(key) or {"steps": {}, "object": {"metadata": {}}}
        pods = pods_by_job.get(key, [])
        complete_set = len(pods) >= record.get("expected_pods", 1)
        times: dict[str, dict[str, float | None]] = {}
        for source in SOURCES:
            step_times: dict[str, float | None] = {"Created": (workload["steps"].get("created") or {}).get(source)}
            created = [(p["steps"].get("created") or {}).get(source) for p in pods]
            step_times["PodsCreated"] = latest(created) if complete_set else None
            for step, pod_key in POD_STEP_KEYS.items():
                values = [pod_step_time(p, pod_key, source, event_times) for p in pods]
                step_times[step] = latest(values) if complete_set else None
            completed = (workload["steps"].get("completed") or {}).get(source)
            if completed is None and complete_set and pods:
                completed = latest([(p["steps"].get("completed") or {}).get(source) for p in pods])
            step_times["Completed"] = completed
            times[source] = step_times
        failed = bool(
            record.get("error")
            or "failed" in workload["steps"]
            or any("failed" in p["steps"] for p in pods)
        )
        applicable = JOB_STEPS if record.get("completes") else JOB_STEPS[:-1]
        timelines.append(
            Timeline(
                key=record["jobName"],
                index=record["index"],
                namespace=record["jobNamespace"],
                base={"watch": record.get("submit_ms"), "object": times["object"]["Created"]},
                times=times,
                applicable=applicable,
                pods=len(pods),
                failed=failed,
                error=record.get("error"),
            )
        )
    return timelines


def pod_timelines(sampled: dict[str, Any]) -> list[Timeline]:
    """kube-burner's podLatency: each pod from its own creation (watch: first seen; object: creationTimestamp)."""
    event_times = scheduled_event_times(sampled.get("events", []))
    timelines = []
    for index, pod in enumerate(sampled.get("pods", [])):
        metadata = pod["object"].get("metadata", {})
        times = {
            source: {step: pod_step_time(pod, key, source, event_times) for step, key in POD_STEP_KEYS.items()}
            for source in SOURCES
        }
        created = pod["steps"].get("created") or {}
        timelines.append(
            Timeline(
                key=metadata.get("name", ""),
                index=index,
                namespace=metadata.get("namespace", ""),
                base={"watch": created.get("watch"), "object": created.get("object")},
                times=times,
                applicable=POD_STEPS,
                pods=1,
                failed="failed" in pod["steps"],
            )
        )
    return timelines


def failed_jobs(timelines: list[Timeline], target: str) -> dict[str, int]:
    """Counts of jobs that failed to submit, failed while running, or never reached ``target`` (Ready/Completed)."""
    submit = sum(1 for t in timelines if t.error)
    runtime = sum(1 for t in timelines if t.failed and not t.error)
    unfinished = sum(
        1 for t in timelines if not t.failed and t.times["watch"].get(target) is None and target in t.applicable
    )
    return {"submit": submit, "runtime": runtime, "unfinished": unfinished, "total": submit + runtime + unfinished}


def scheduling_throughput(sampled: dict[str, Any]) -> float:
    """Pods scheduled per second (watch clock), from the first pod creation to the last pod scheduling."""
    created = [(p["steps"].get("created") or {}).get("watch") for p in sampled.get("pods", [])]
    scheduled = [(p["steps"].get("scheduled") or {}).get("watch") for p in sampled.get("pods", [])]
    created_ms = [t for t in created if t is not None]
    scheduled_ms = [t for t in scheduled if t is not None]
    if not scheduled_ms or not created_ms:
        return 0.0
    span_s = (max(scheduled_ms) - min(created_ms)) / 1000.0
    return round(len(scheduled_ms) / span_s, 3) if span_s > 0 else float(len(scheduled_ms))


def times_table(timelines: list[Timeline]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of times.csv: per job, each step's delta in ms from its source's base."""
    header = ["index", "job", "namespace", "pods", "failed", "submit_offset_ms"]
    header += [f"{step}_{source}_ms" for source in SOURCES for step in SOURCE_STEPS[source]]
    first_submit = min((b for t in timelines if (b := t.base.get("watch")) is not None), default=0.0)
    rows = []
    for t in timelines:
        submit = t.base.get("watch")
        row = [str(t.index), t.key, t.namespace, str(t.pods), "1" if t.failed else "0"]
        row.append("" if submit is None else f"{submit - first_submit:.3f}")
        for source in SOURCES:
            for step in SOURCE_STEPS[source]:
                delta = t.delta(source, step) if step in t.applicable else None
                row.append("" if delta is None else f"{delta:.3f}")
        rows.append(row)
    return header, rows


def write_times_csv(timelines: list[Timeline], path: Path) -> None:
    """times.csv: one header line, columns padded to a common width (read it with skipinitialspace=True)."""
    write_padded_csv(*times_table(timelines), path)


LIFECYCLE = "lifecycle"  # the source of a lifecycle's own times: per step, the one its `time` chooses


def transitions(lifecycle: Lifecycle) -> list[tuple[str, str]]:
    chain = [step.name for step in lifecycle.chain]
    return list(zip(chain, chain[1:], strict=False))


def lifecycle_timelines(lifecycle: Lifecycle, objects: list[dict[str, Any]]) -> list[Timeline]:
    """One timeline per sampled object of `lifecycle` (``sampled.json`` "lifecycles" -> name -> objects), in the
    order they reached their first step; base: that first step. A failed object (a failure step reached) counts
    only the steps it reached."""
    built = []
    for sampled in objects:
        steps, metadata = sampled["steps"], sampled["object"].get("metadata", {})
        times: dict[str, dict[str, float | None]] = {
            source: {s.name: (steps.get(s.name) or {}).get(source) for s in lifecycle.steps} for source in SOURCES}
        times[LIFECYCLE] = {s.name: (steps.get(s.name) or {}).get(lifecycle.source_of(s)) for s in lifecycle.steps}
        failed = any(s.failure and s.name in steps for s in lifecycle.steps)
        chain = tuple(s.name for s in lifecycle.chain if not failed or s.name in steps)
        first = lifecycle.chain[0].name if lifecycle.chain else lifecycle.steps[0].name
        built.append(Timeline(key=metadata.get("name", ""), index=0, namespace=metadata.get("namespace", ""),
                              base={source: times[source].get(first) for source in times}, times=times,
                              applicable=chain, pods=0, failed=failed))
    built.sort(key=lambda t: (t.base[LIFECYCLE] is None, t.base[LIFECYCLE] or 0.0, t.namespace, t.key))
    for index, timeline in enumerate(built):
        timeline.index = index
    return built


def lifecycle_table(lifecycle: Lifecycle, timelines: list[Timeline]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of lifecycle_<name>.csv: per object, each step from its first step and each transition
    (ms, the lifecycle's times)."""
    pairs = transitions(lifecycle)
    header = ["index", "name", "namespace", "failed", "first_offset_ms"]
    header += [f"{step.name}_ms" for step in lifecycle.chain[1:]] + [f"{a}_{b}_ms" for a, b in pairs]
    first = min((b for t in timelines if (b := t.base.get(LIFECYCLE)) is not None), default=0.0)
    rows = []
    for t in timelines:
        start = t.base.get(LIFECYCLE)
        row = [str(t.index), t.key, t.namespace, "1" if t.failed else "0",
               "" if start is None else f"{start - first:.3f}"]
        values = [t.delta(LIFECYCLE, step.name) for step in lifecycle.chain[1:]]
        values += [t.between(LIFECYCLE, a, b) for a, b in pairs]
        row += ["" if v is None else f"{v:.3f}" for v in values]
        rows.append(row)
    return header, rows


def write_padded_csv(header: list[str], rows: list[list[str]], path: Path) -> None:
    """One header line, columns padded to a common width (read it with skipinitialspace=True)."""
    widths = [max([len(header[i])] + [len(r[i]) for r in rows]) for i in range(len(header))]
    lines = [",".join(cell.rjust(widths[i]) for i, cell in enumerate(row)) for row in [header, *rows]]
    path.write_text("\n".join(lines) + "\n")
