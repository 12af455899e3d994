"""The scale test: submit N GPU jobs, time every lifecycle step, report latencies as KPIs, enforce thresholds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pytest_topsail as topsail
from pytest_topsail.scale import RunOptions, ScaleCase, ScaleResult, describe_faults, run_case


def test_scale(case: topsail.Case, scale_api: topsail.Kube, scale_options: RunOptions, scale_progress: Any,
               scale_settings: Any, artifact_dir: Path, kpis: topsail.KpiRecorder) -> None:
    settings = ScaleCase.from_settings(case.settings, where=f"{case.source}")
    result = run_case(scale_api, settings, artifact_dir, scale_options, progress=scale_progress)
    kpis.record_from(result)
    faults = result.summary.get("faults")
    if faults:  # the latencies went through the fault: kept, shown, never history points
        kpis.exclude(describe_faults(faults))
        kpis.warn(describe_faults(faults))
    record_lifecycle_kpis(kpis, result)
    for name, figure in result.figures.items():
        kpis.add_figure(f"{case.id}: {name}", figure)
    problems = run_problems(result, scale_settings.max_failed_jobs)
    if problems:
        pytest.fail("\n".join(problems + [f"latency table: {artifact_dir / 'latency.txt'}"]), pytrace=False)


def run_problems(result: ScaleResult, max_failed_jobs: int) -> list[str]:
    summary = result.summary
    problems = list(result.violations)
    if summary.get("faults") and (summary["failed_jobs"]["total"] > max_failed_jobs or summary["timed_out"]):
        problems.insert(0, describe_faults(summary["faults"]))  # the cause first, the counts below
    for cause in ("cluster_lost", "unschedulable"):
        if summary.get(cause):
            problems.insert(0, summary[cause])
    failed = summary["failed_jobs"]
    if failed["total"] > max_failed_jobs:
        problems.append(f"{failed['total']} failed jobs (submit {failed['submit']}, runtime {failed['runtime']}, "
                        f"never {summary['target']} {failed['unfinished']}) > max_failed_jobs {max_failed_jobs}")
        problems.extend(f"submit error: {error}" for error in summary.get("submit_errors") or [])
    for name in (summary.get("cleanup") or {}).get("remaining") or []:
        problems.append(f"cleanup: namespace {name} is still on the cluster (see LEFT ON THE CLUSTER at the end)")
    if summary["timed_out"]:
        problems.append(f"not every job reached {summary['target']} or failed within the case's timeout_s")
    return problems


def record_lifecycle_kpis(kpis: topsail.KpiRecorder, result: ScaleResult) -> None:
    """The transitions of a lifecycle of the suite's own (the built-in ones are declared in kpis.py)."""
    for stats in result.stats:
        if stats.source != "lifecycle":
            continue
        first, second = stats.step.split("->")
        for metric in ("P50", "P90", "P99", "max"):
            name = f"lifecycle_{stats.level}_{first.lower()}_{second.lower()}_{metric.lower()}_ms"
            value = stats.metric(metric)
            if value is None or name in kpis.specs:
                continue
            kpis.record(name, value, unit="ms", lower_better=True, format="{:.1f}", samples=float(stats.count),
                        help=f"{metric} of the delay from {first} to {second} of each {stats.level} object",
                        ignored_for_regression=metric == "max")
