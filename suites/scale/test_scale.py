"""The scale test: submit N GPU jobs, time every lifecycle step, report latencies as KPIs, enforce thresholds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pytest_topsail as topsail
from pytest_topsail.scale import RunOptions, ScaleCase, ScaleResult, run_case


def test_scale(case: topsail.Case, scale_api: topsail.Kube, scale_options: RunOptions, scale_progress: Any,
               scale_settings: Any, artifact_dir: Path, kpis: topsail.KpiRecorder) -> None:
    settings = ScaleCase.from_settings(case.settings, where=f"{case.source}")
    result = run_case(scale_api, settings, artifact_dir, scale_options, progress=scale_progress)
    kpis.record_from(result)
    for name, figure in result.figures.items():
        kpis.add_figure(f"{case.id}: {name}", figure)
    problems = run_problems(result, scale_settings.max_failed_jobs)
    if problems:
        pytest.fail("\n".join(problems + [f"latency table: {artifact_dir / 'latency.txt'}"]), pytrace=False)


def run_problems(result: ScaleResult, max_failed_jobs: int) -> list[str]:
    summary = result.summary
    problems = list(result.violations)
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
