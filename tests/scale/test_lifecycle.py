"""Lifecycles of any resource (pytest_topsail.scale.lifecycle): steps from conditions and field paths, the scale
run's own pod steps as one of them, the suite's `lifecycle:` settings and their errors, transitions and their
quantiles, the lifecycle CSV and figure."""

from __future__ import annotations

import csv
from typing import Any

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.scale.latency import Threshold, check_thresholds, lifecycle_stats
from pytest_topsail.scale.lifecycle import POD, SCALE_WORKLOADS, builtin, parse_lifecycles, resolve
from pytest_topsail.scale.plots import lifecycle_figure
from pytest_topsail.scale.timelines import lifecycle_table, lifecycle_timelines, write_padded_csv
from tests.scale.conftest import T0_MS, iso


def condition(kind: str, at_ms: float, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "lastTransitionTime": iso(at_ms, whole_seconds=True)}


def test_paths_span_lists_and_alternatives():
    pod = {"status": {"containerStatuses": [{"state": {"running": {"startedAt": "a"}}},
                                            {"state": {"terminated": {"startedAt": "b"}}}]}}
    assert resolve(pod, "status.containerStatuses[*].state.running|terminated.startedAt") == ["a", "b"]
    assert resolve(pod, "status.containerStatuses[1].state.terminated.startedAt") == ["b"]
    assert resolve(pod, "status.containerStatuses[5].state") == [None]
    assert resolve(pod, "spec.nodeName") == [None]
    assert resolve({"status": {"containerStatuses": []}}, "status.containerStatuses[*].name") == []


def test_the_pod_steps_of_the_scale_run_are_a_lifecycle():
    started, ready = T0_MS + 2000, T0_MS + 3000
    pod = {"metadata": {"creationTimestamp": iso(T0_MS, whole_seconds=True)},
           "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
           "status": {"phase": "Running",
                      "conditions": [condition("PodScheduled", T0_MS + 1000), condition("Initialized", T0_MS + 1000),
                                     condition("Ready", ready)],
                      "containerStatuses": [{"state": {"running": {"startedAt": iso(started - 1000, True)}}},
                                            {"state": {"running": {"startedAt": iso(started, True)}}}]}}
    states = POD.states(pod)
    assert states["created"] == (True, T0_MS)
    assert states["scheduled"] == (True, T0_MS + 1000)
    assert states["started"] == (True, started)  # the last container's start
    assert states["ready"] == (True, ready)
    assert states["completed"] == (False, None) and states["failed"] == (False, None)
    pod["status"]["containerStatuses"][1]["state"] = {"waiting": {"reason": "ContainerCreating"}}
    assert POD.states(pod)["started"] == (False, None)  # every container, as before
    pod["status"]["phase"] = "Succeeded"
    pod["status"]["containerStatuses"] = [{"state": {"terminated": {"startedAt": iso(started, True),
                                                                    "finishedAt": iso(T0_MS + 9000, True)}}}] * 2
    assert POD.states(pod)["completed"] == (True, T0_MS + 9000)
    job = {"metadata": {"creationTimestamp": iso(T0_MS, True)},
           "status": {"completionTime": iso(T0_MS + 5000, True), "conditions": [condition("Complete", T0_MS + 6000)]}}
    assert SCALE_WORKLOADS["Job"].states(job)["completed"] == (True, T0_MS + 5000)  # completionTime, not the condition


def test_field_steps_with_a_value_and_condition_statuses():
    rayjob = parse_lifecycles([{"name": "rayjob", "api_version": "ray.io/v1", "kind": "RayJob", "steps": [
        {"name": "Running", "field": "status.jobDeploymentStatus", "value": "Running"},
        {"name": "Complete", "field": "status.jobDeploymentStatus", "value": "Complete",
         "time_field": "status.endTime"},
        {"name": "Suspended", "condition": "Suspended", "status": "False"}]}], "test")[0]
    states = rayjob.states({"status": {"jobDeploymentStatus": "Complete", "endTime": iso(T0_MS, True),
                                       "conditions": [condition("Suspended", T0_MS, "False")]}})
    assert states == {"Running": (False, None), "Complete": (True, T0_MS), "Suspended": (True, T0_MS)}
    assert [rayjob.source_of(s) for s in rayjob.steps] == ["watch", "object", "object"]
    observed = builtin("pytorchjob", time="observed")
    assert {observed.source_of(s) for s in observed.steps} == {"watch"}


@pytest.mark.parametrize("raw, message", [
    (["rayjob"], r"tests.scale.lifecycle\[0\]: unknown built-in lifecycle 'rayjob'; built-ins: pytorchjob, "
                 r"workload, inferenceservice"),
    ([{"builtin": "pytorchjob", "steps": [{"name": "A", "condition": "Running", "field": "status.x"}]}],
     r"tests.scale.lifecycle\[0\]: invalid lifecycle.*step A: give exactly one of condition"),
    ([{"name": "x", "api_version": "v1", "kind": "Pod", "steps": [{"name": "A", "field": "status..phase"}]}],
     r"path 'status..phase': '' is not a key"),
    ([{"name": "pods", "api_version": "v1", "kind": "Pod", "steps": [{"name": "A", "condition": "Ready"}]}],
     r"lifecycle name 'pods' is taken"),
    (["pytorchjob", "pytorchjob"], r"\[1\]: lifecycle name 'pytorchjob' is taken"),
    ([{"name": "x", "api_version": "v1", "kind": "Pod", "steps": [{"name": "A", "field": "spec.nodeName",
                                                                    "time": "transition"}]}],
     r"step A: time transition needs a condition or a time_field"),
    ("pytorchjob", r"a list of lifecycles"),
])
def test_bad_lifecycle_settings_are_one_clear_error(raw, message):
    with pytest.raises(TopsailError, match=message):
        parse_lifecycles(raw, "tests.scale.lifecycle")


def sampled_object(name: str, steps: dict[str, float], failed: bool = False) -> dict[str, Any]:
    recorded = {step: {"watch": at + 7, "object": at} for step, at in steps.items()}
    if failed:
        recorded["Failed"] = {"watch": T0_MS + 99_000, "object": T0_MS + 99_000}
    return {"object": {"metadata": {"name": name, "namespace": "ns"}}, "steps": recorded, "deleted": False}


def test_transitions_per_object_with_quantiles_csv_and_figure(tmp_path):
    lifecycle = builtin("pytorchjob")
    objects = [sampled_object(f"job-{i}", {"Created": T0_MS + i * 10, "Running": T0_MS + i * 10 + 1000 + i,
                                            "Succeeded": T0_MS + i * 10 + 5000}) for i in range(20)]
    objects.append(sampled_object("crashed", {"Created": T0_MS, "Running": T0_MS + 500}, failed=True))
    timelines = lifecycle_timelines(lifecycle, objects)
    assert [t.key for t in timelines][:3] == ["crashed", "job-0", "job-1"]  # by their first step
    stats = {s.step: s for s in lifecycle_stats(lifecycle, timelines)}
    assert list(stats) == ["Created->Running", "Running->Succeeded"]
    running = stats["Created->Running"]
    assert running.expected == 21 and running.errors == 0  # the failed job did reach Running
    assert running.P50 == 1009 and running.P90 == 1017 and running.P99 == 1019 and running.max == 1019
    succeeded = stats["Running->Succeeded"]
    assert succeeded.expected == 20 and succeeded.errors == 0  # a failed job never counts as missing Succeeded
    assert succeeded.P50 == 3990 and succeeded.max == 4000
    write_padded_csv(*lifecycle_table(lifecycle, timelines), tmp_path / "lifecycle.csv")
    with (tmp_path / "lifecycle.csv").open() as file:
        rows = list(csv.DictReader(file, skipinitialspace=True))
    assert len(rows) == 21
    job = next(r for r in rows if r["name"] == "job-3")
    assert float(job["Created_Running_ms"]) == 1003 and float(job["Running_Succeeded_ms"]) == 3997
    assert float(job["Succeeded_ms"]) == 5000 and float(job["first_offset_ms"]) == 30
    crashed = next(r for r in rows if r["name"] == "crashed")
    assert crashed["failed"] == "1" and crashed["Running_Succeeded_ms"] == ""
    figure = lifecycle_figure(lifecycle, timelines)
    assert [a.text for a in figure.layout.annotations][0].startswith("Created -> Running")
    assert len(figure.data) == 4 and len(figure.data[0].y) == 21


def test_a_threshold_on_a_lifecycle_transition_is_checked_and_named():
    lifecycle = builtin("pytorchjob")
    objects = [sampled_object(f"job-{i}", {"Created": T0_MS, "Running": T0_MS + 2000, "Succeeded": T0_MS + 3000})
               for i in range(5)]
    stats = lifecycle_stats(lifecycle, lifecycle_timelines(lifecycle, objects))
    slow = Threshold.parse({"level": "pytorchjob", "step": "Created->Running", "metric": "P90", "max_ms": 1500},
                           "thresholds[0]", [lifecycle])
    fast = Threshold.parse({"level": "pytorchjob", "step": "Running->Succeeded", "metric": "max", "max_ms": 1500},
                           "thresholds[1]", [lifecycle])
    assert slow.source == "lifecycle"
    assert check_thresholds(stats, [slow, fast]) == [
        "pytorchjob step Created->Running (lifecycle) P90 = 2000.0 ms exceeds threshold 1500 ms"]
    with pytest.raises(TopsailError, match=r"thresholds\[0\]: source must be lifecycle"):
        Threshold.parse({"level": "pytorchjob", "step": "Created->Running", "metric": "P90", "max_ms": 1,
                         "source": "watch"}, "thresholds[0]", [lifecycle])


def test_per_replica_steps_from_the_replica_statuses():
    """PyTorchJob per replica (kube-burner #1207 asks for it): counts of status.replicaStatuses as field values."""
    (replicas,) = parse_lifecycles([{"name": "pytorchjob_replicas", "api_version": "kubeflow.org/v1",
                                     "kind": "PyTorchJob", "time": "observed", "steps": [
                                         {"name": "WorkersUp", "field": "status.replicaStatuses.Worker.active",
                                          "value": 2},
                                         {"name": "MasterDone", "field": "status.replicaStatuses.Master.succeeded",
                                          "value": 1}]}], "test")
    running = {"status": {"replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 2}}}}
    one_worker = {"status": {"replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 1}}}}
    done = {"status": {"replicaStatuses": {"Master": {"succeeded": 1}, "Worker": {"succeeded": 2}}}}
    assert replicas.states(one_worker) == {"WorkersUp": (False, None), "MasterDone": (False, None)}
    assert replicas.states(running)["WorkersUp"] == (True, None)  # observed: the sampler's clock
    assert replicas.states(done) == {"WorkersUp": (False, None), "MasterDone": (True, None)}
