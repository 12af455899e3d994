"""KPIs of the scale suite, computed from a ``ScaleResult`` (pytest_topsail.scale.run).

- ``job_<step>_<metric>_ms``: per job, from submission to the step (watch observation times, ms), P50/P95/P99/max/avg.
  A step the workload never reaches (Completed of a job that runs forever) records nothing; a step with more than 10%
  errors (missing or negative deltas) records nothing either, and its thresholds fail instead.
- ``pod_<step>_object_p99_ms``: kube-burner's podLatency P99 (object timestamps, from each pod's creationTimestamp).
- ``submission_jobs_per_s``, ``scheduling_pods_per_s``: throughputs; ``failed_jobs``: submit + runtime + unfinished.
- ``lifecycle_<name>_<step>_<next step>_<metric>_ms`` (``tests.scale.lifecycle``): P50/P90/P99/max of each
  transition of a sampled lifecycle, per object, in the times the lifecycle reports (docs/scale.md "Lifecycles").
  Declared here for the built-in lifecycles (a replot recomputes them); the test records those of a lifecycle of the
  suite's own with the same names (a replot rebuilds its tables and figure, not these KPIs).
- ``queue_*`` (cases with ``queue:``, Kueue): submission -> QuotaReserved P50/P95/P99, preemptions, quota utilisation,
  the smallest team fairness ratio (pytest_topsail.scale.queueing; per queue and priority in queue.json).

Judged for what they are (docs/kpis-and-regressions.md): ``max`` is informational (one slow job moves it); P95, P99
and the throughputs carry their sample size (jobs, pods); the throughputs are judged from 100 samples on
(regression.TAIL_MIN_SAMPLES): the P99 of 5 jobs is their maximum, and a rate over 5 pods scheduled within a few
milliseconds measures the client's timing more than the cluster; P95 and P99 need 10 samples beyond them (200 and
1,000 jobs). P50 and avg are judged at every size.

The ``job_*`` KPIs and ``submission_jobs_per_s`` are ``machine_bound``: timed on this machine's clock from the
client's request, they all carry the API round trip and the watch's delivery (against the simulator: this machine's
own work, ~20 ms quiet, 200 ms and more at a load of 10 on 2 cores), so a change made of CPU contention is not
judged (docs/kpis-and-regressions.md).
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_topsail import kpi
from pytest_topsail.scale import (
    BUILTIN_LIFECYCLES,
    JOB_STEPS,
    METRICS,
    POD_STEPS,
    ScaleResult,
    analyse_directory,
    find,
)


def step_kpi(step: str, metric: str, source: str, level: str) -> Callable[[ScaleResult], float | None]:
    def value(result: ScaleResult) -> float | None:
        stats = find(result.stats, step, source, level)
        return None if stats is None else stats.metric(metric)

    return value


def step_samples(step: str, source: str, level: str) -> Callable[[ScaleResult], float | None]:
    def count(result: ScaleResult) -> float | None:
        stats = find(result.stats, step, source, level)
        return None if stats is None else float(stats.count)

    return count


MAXIMUM_WHY = "a maximum moves with a single slow job"
TAILS = {"P90": 100, "P95": 200, "P99": 1000}  # judged from this many samples on: 10 samples lie beyond the quantile


def declare(name: str, function: Callable[[ScaleResult], Any], help_text: str, metric: str,
            samples: Callable[[ScaleResult], float | None], machine_bound: bool) -> None:
    function.__name__ = name
    globals()[name] = kpi(unit="ms", help=help_text, lower_better=True, format="{:.1f}",
                          ignored_for_regression=metric == "max", why=MAXIMUM_WHY if metric == "max" else "",
                          samples=samples if metric in TAILS else None,
                          min_samples=TAILS.get(metric), machine_bound=machine_bound)(function)


for _step in JOB_STEPS:
    for _metric in METRICS:
        declare(f"job_{_step.lower()}_{_metric.lower()}_ms", step_kpi(_step, _metric, "watch", "job"),
                f"{_metric} of the delay from job submission to {_step} (watch observation times)", _metric,
                step_samples(_step, "watch", "job"), machine_bound=True)
for _step in POD_STEPS:
    declare(f"pod_{_step.lower()}_object_p99_ms", step_kpi(_step, "P99", "object", "pod"),
            f"P99 of the delay from pod creationTimestamp to {_step} (object timestamps, kube-burner podLatency)",
            "P99", step_samples(_step, "object", "pod"), machine_bound=False)


LIFECYCLE_METRICS = ("P50", "P90", "P99", "max")


def lifecycle_kpi_name(lifecycle: str, transition: str, metric: str) -> str:
    """``lifecycle_pytorchjob_created_running_p99_ms`` for the transition "Created->Running" of pytorchjob."""
    first, second = transition.split("->")
    return f"lifecycle_{lifecycle}_{first.lower()}_{second.lower()}_{metric.lower()}_ms"


def lifecycle_help(lifecycle: str, transition: str, metric: str) -> str:
    first, second = transition.split("->")
    return f"{metric} of the delay from {first} to {second} of each {lifecycle} object (its lifecycle's times)"


for _name, _spec in BUILTIN_LIFECYCLES.items():
    _chain = [step["name"] for step in _spec["steps"] if not step.get("failure")]
    for _first, _second in zip(_chain, _chain[1:], strict=False):
        for _metric in LIFECYCLE_METRICS:
            _transition = f"{_first}->{_second}"
            declare(lifecycle_kpi_name(_name, _transition, _metric),
                    step_kpi(_transition, _metric, "lifecycle", _name),
                    lifecycle_help(_name, _transition, _metric), _metric,
                    step_samples(_transition, "lifecycle", _name), machine_bound=False)


def job_count(result: ScaleResult) -> float:
    return float(result.summary["jobs"])


def pod_count(result: ScaleResult) -> float:
    return float(result.summary["pods"])


@kpi(unit="jobs/s", help="Jobs submitted per second (first request to last answer)", higher_better=True,
     format="{:.1f}", samples=job_count, machine_bound=True)
def submission_jobs_per_s(result: ScaleResult) -> float:
    return result.summary["submission_jobs_per_s"]


@kpi(unit="pods/s", help="Pods scheduled per second (first pod created to last pod scheduled)", higher_better=True,
     format="{:.1f}", samples=pod_count)
def scheduling_pods_per_s(result: ScaleResult) -> float:
    return result.summary["scheduling_pods_per_s"]


@kpi(unit="jobs", help="Jobs that failed to submit, failed while running, or never reached their target step",
     lower_better=True, format="{:.0f}")
def failed_jobs(result: ScaleResult) -> float:
    return result.summary["failed_jobs"]["total"]


def queue_wait(metric: str) -> Callable[[ScaleResult], float | None]:
    def value(result: ScaleResult) -> float | None:
        wait = ((result.summary.get("queue") or {}).get("latency_ms") or {}).get("all", {}).get("QuotaReserved")
        return None if not wait else wait.get(metric)

    return value


def queue_value(key: str) -> Callable[[ScaleResult], float | None]:
    def value(result: ScaleResult) -> float | None:
        queue = result.summary.get("queue")
        return None if not queue else queue.get(key)

    return value


def workload_count(result: ScaleResult) -> float | None:
    queue = result.summary.get("queue")
    return None if not queue else float(queue["workloads"])


# Kueue (cases with `queue:`, docs/scale.md): nothing is recorded for a case without queues.
for _metric in ("P50", "P95", "P99"):
    declare(f"queue_quota_reserved_{_metric.lower()}_ms", queue_wait(_metric),
            f"{_metric} of the delay from job submission to its Workload's QuotaReserved (watch times)", _metric,
            workload_count, machine_bound=True)
def declare_queue(name: str, key: str, **spec: Any) -> None:
    function = queue_value(key)
    function.__name__ = name
    globals()[name] = kpi(**spec)(function)


declare_queue("queue_preemptions", "preemptions", unit="workloads", lower_better=True, format="{:.0f}",
              help="Workloads evicted to make room for others (Kueue preemption)")
declare_queue("queue_quota_utilisation_pct", "total_quota_utilisation_pct", unit="%", higher_better=True,
              format="{:.1f}", help="GPU-seconds held by admitted Workloads over the ClusterQueues' nominal GPUs x "
              "the run's span (above 100: borrowed quota)")
declare_queue("queue_fairness_min_ratio", "fairness_min_ratio", unit="ratio", higher_better=True, format="{:.3f}",
              help="Smallest team ratio of admitted GPU-seconds share to nominal quota share (1: fair)")

def samples(artifact_dir: Path) -> dict[str, list[float]]:
    """The raw samples (ms) of the ``job_<step>_*`` KPIs: per job, the delay from its submission to the step
    (times.csv, watch times; a negative delta counts as 0, as in the statistics)."""
    path = Path(artifact_dir) / "times.csv"
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file, skipinitialspace=True))
    found = {}
    for step in JOB_STEPS:
        column = f"{step}_watch_ms"
        values = [max(float(row[column]), 0.0) for row in rows if (row.get(column) or "").strip()]
        if values:
            found[f"job_{step.lower()}"] = values
    return found


def parse(artifact_dir: Path) -> ScaleResult:
    """--topsail-replot: the analysis again from the saved submitted.json and sampled.json (figures rewritten)."""
    return analyse_directory(Path(artifact_dir))
