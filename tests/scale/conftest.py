"""Helpers of the scale library's tests: synthetic submitted.json / sampled.json documents."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from pytest_topsail.scale.workloads import JOB_LABEL

T0_MS = 1_800_000_000_000.0  # an epoch in ms


def iso(ms: float, whole_seconds: bool = False) -> str:
    moment = datetime.fromtimestamp(ms / 1000.0, UTC)
    if whole_seconds:
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def synthetic_run(
    jobs: int = 10,
    step_ms: dict[str, float] | None = None,
    missing_ready: int = 0,
    completes: bool = False,
    whole_seconds: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Jobs submitted 10 ms apart; each step reached a fixed time after submission (``step_ms``, cumulative)."""
    step_ms = step_ms or {"created": 5, "pod": 10, "scheduled": 20, "initialized": 30, "started": 40, "ready": 50}
    records, workloads, pods, events = [], [], [], []
    for i in range(jobs):
        submit = T0_MS + 10 * i
        name = f"j-{i:05d}"
        records.append(
            {"index": i, "jobName": name, "jobNamespace": "ns", "kind": "Job", "submit_ms": submit,
             "response_ms": submit + 2, "expected_pods": 1, "completes": completes, "attempts": 1, "error": None}
        )
        created = submit + step_ms["created"]
        workload_steps: dict[str, Any] = {"created": {"watch": created + 1, "object": created}}
        if completes:
            workload_steps["completed"] = {"watch": submit + 1001, "object": submit + 1000}
        workloads.append({"object": {"kind": "Job", "metadata": {"name": name, "namespace": "ns"}},
                          "steps": workload_steps, "deleted": False})
        pod_steps: dict[str, Any] = {}
        for step, key in (("created", "pod"), ("scheduled", "scheduled"), ("initialized", "initialized"),
                          ("started", "started"), ("ready", "ready")):
            if step == "ready" and i < missing_ready:
                continue
            ts = submit + step_ms[key]
            object_ts = ts
            if whole_seconds:
                object_ts = float(int(ts // 1000) * 1000)
            pod_steps[step] = {"watch": ts + 1, "object": object_ts}
        pod_name = f"{name}-abcde"
        pods.append({"object": {"metadata": {"name": pod_name, "namespace": "ns", "labels": {JOB_LABEL: name}}},
                     "steps": pod_steps, "deleted": False})
        events.append({"reason": "Scheduled", "namespace": "ns", "pod": pod_name,
                       "eventTime": iso(submit + step_ms["scheduled"] - 1), "observed_ms": submit + 25})
    submitted = {"jobs": records, "target": "completed" if completes else "ready", "achieved_jobs_per_s": 100.0,
                 "offered_jobs_per_s": None, "duration_s": 0.1}
    sampled = {"version": 1, "workloads": workloads, "pods": pods, "events": events, "errors": []}
    return submitted, sampled


@pytest.fixture
def make_run():
    return synthetic_run
