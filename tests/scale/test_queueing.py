"""Scale cases with Kueue queues: settings, the queue KPIs from watched Workloads, and a run on the simulator through
its API (Jobs suspended by Kueue's webhook, admitted within quota, KPIs per queue and priority)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.kube.client import Kube, connect
from pytest_topsail.scale.lifecycle import parse_lifecycles
from pytest_topsail.scale.queueing import QueueSettings, analyse_queues, pending_series, queue_objects
from pytest_topsail.scale.run import RunOptions, ScaleCase, analyse_directory, run_case
from pytest_topsail.sim.run.launcher import SimCluster

T0 = 1_800_000_000_000.0

QUEUES = {
    "cluster_queues": [
        {"name": "cq-a", "gpus": 4, "borrowing_limit": 2, "cohort": "lab", "strategy": "StrictFIFO",
         "preemption": "LowerPriority"},
        {"name": "cq-b", "gpus": 2, "borrowing_limit": 1, "cohort": "lab", "strategy": "StrictFIFO"}],
    "teams": [{"name": "team-a", "cluster_queue": "cq-a"}, {"name": "team-b", "cluster_queue": "cq-b"},
              {"name": "urgent", "cluster_queue": "cq-a", "priority": 1000}],
}


def test_queue_settings_are_checked_naming_the_key():
    with pytest.raises(TopsailError, match="cluster_queue 'nope' is none of"):
        ScaleCase.from_settings({"queue": {"cluster_queues": [{"name": "a", "gpus": 1}],
                                           "teams": [{"name": "t", "cluster_queue": "nope"}]}}, "case")
    with pytest.raises(TopsailError, match="borrowing_limit needs a cohort"):
        ScaleCase.from_settings({"queue": {"cluster_queues": [{"name": "a", "gpus": 1, "borrowing_limit": 1}],
                                           "teams": [{"name": "t", "cluster_queue": "a"}]}}, "case")


def test_interactive_deployments_cannot_be_queued():
    with pytest.raises(TopsailError, match="not interactive"):
        ScaleCase.from_settings({"workload": "interactive", "queue": QUEUES}, "case")


def test_queue_objects_carry_the_run_id_and_one_local_queue_per_team_namespace():
    objects = queue_objects(QueueSettings.model_validate(QUEUES), "r1", ["ns-0", "ns-1", "ns-2"])
    kinds = [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in objects]
    assert kinds[:3] == [("ResourceFlavor", "default-flavor-r1", None), ("ClusterQueue", "cq-a-r1", None),
                         ("ClusterQueue", "cq-b-r1", None)]
    assert [k for k in kinds if k[0] == "LocalQueue"] == [("LocalQueue", "queue", f"ns-{n}") for n in range(3)]
    cq = objects[1]["spec"]
    assert cq["cohort"] == "lab-r1" and cq["preemption"]["withinClusterQueue"] == "LowerPriority"
    gpu = cq["resourceGroups"][0]["flavors"][0]["resources"][2]
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": 4, "borrowingLimit": 2}


def _record(ns: str, job: str, cq: str, held: list, *, priority: int = 0, finished: float | None = None,
            evictions: int = 0) -> dict:
    return {"namespace": ns, "job": job, "created_ms": T0, "cluster_queue": cq, "priority": priority, "gpus": 1.0,
            "held": held, "admitted_ms": held[0][0] if held else None, "finished_ms": finished,
            "evictions": evictions}


def test_queue_kpis_from_workload_records():
    settings = QueueSettings.model_validate(QUEUES)
    records = [  # cq-a: 1 GPU for 10 s, then preempted and readmitted for 10 s; cq-b: 1 GPU for 10 s
        _record("ns-0", "a", "cq-a-r1", [[T0 + 1000, T0 + 11000], [T0 + 12000, T0 + 22000]], finished=T0 + 22000,
                evictions=1),
        _record("ns-1", "b", "cq-b-r1", [[T0 + 2000, T0 + 12000]], finished=T0 + 12000),
        _record("ns-2", "c", "", []),  # still pending
    ]
    jobs = {"ns-0/a": {"submit_ms": T0, "Ready": T0 + 1500, "Completed": None},
            "ns-1/b": {"submit_ms": T0, "Ready": T0 + 2100, "Completed": None}}
    sampled = {"settings": settings.model_dump(), "run_id": "r1", "namespaces": ["ns-0", "ns-1", "ns-2"],
               "workloads": records}
    analysis = analyse_queues(sampled, jobs)
    assert analysis["preemptions"] == 1 and analysis["span_s"] == 22.0
    assert analysis["latency_ms"]["cluster_queue=cq-a-r1"]["QuotaReserved"]["P50"] == 1000
    assert analysis["latency_ms"]["cluster_queue=cq-b-r1"]["Running"]["P50"] == 100
    assert analysis["quota_utilisation_pct"] == {"cq-a-r1": round(100 * 20 / (4 * 22), 2),
                                                 "cq-b-r1": round(100 * 10 / (2 * 22), 2)}
    fairness = analysis["fairness"]
    assert fairness["team-a"]["admitted_share"] == round(20 / 30, 4)
    assert fairness["team-a"]["quota_share"] == round(4 / 2 / 6, 4)  # cq-a is shared by two teams
    assert fairness["urgent"]["admitted_gpu_s"] == 0 and analysis["fairness_min_ratio"] == 0
    assert pending_series(records, T0)["cq-a-r1"] == [[0.0, 1.0], [1.0, 0.0], [11.0, 1.0], [12.0, 0.0]]


@pytest.fixture(scope="module")
def api() -> Iterator[Kube]:
    with SimCluster({"preinstalled": ["all"]}, nodes=2, gpu_profile="a100", seed=5) as sim:
        kube = connect(sim.kubeconfig_path, pool_size=8)
        yield kube
        kube.close()


def test_a_queued_run_on_the_simulator_stays_within_quota_and_reports_the_queue(api, tmp_path):
    case = ScaleCase(workload="training", jobs=30, gpus=1, duration_s=0.5, qps=200, timeout_s=120, queue=QUEUES)
    result = run_case(api, case, tmp_path, RunOptions(namespace_prefix="q", plots=True), run_id="kq0001")
    assert result.summary["failed_jobs"]["total"] == 0 and not result.summary["timed_out"]
    queue = json.loads((tmp_path / "queue.json").read_text())
    assert queue == result.summary["queue"] and queue["workloads"] == 30
    sampled = json.loads((tmp_path / "sampled.json").read_text())["queue"]["workloads"]
    intervals = [(h[0], h[1], r["cluster_queue"]) for r in sampled for h in r["held"]]
    for at, _, _ in intervals:  # at each admission (watch times), the GPUs held stay within quota + borrowing
        held = {cq: sum(1 for a, b, q in intervals if q == cq and a <= at and (b is None or b > at))
                for cq in ("cq-a-kq0001", "cq-b-kq0001")}
        assert held["cq-a-kq0001"] <= 6 and held["cq-b-kq0001"] <= 3 and sum(held.values()) <= 6
    assert set(queue["latency_ms"]) >= {"all", "priority=0", "priority=1000", "cluster_queue=cq-a-kq0001"}
    assert queue["latency_ms"]["all"]["QuotaReserved"]["count"] == 30
    assert 0 < queue["total_quota_utilisation_pct"] <= 100 and (tmp_path / "queue.html").is_file()
    assert "queue" in result.figures
    assert not api.list("kueue.x-k8s.io/v1beta1", "ClusterQueue")  # the run's cluster objects are deleted
    metrics = api.request("GET", "/metrics/kueue", raw=True)  # Kueue's metrics, served by the simulator
    assert 'kueue_admission_wait_time_seconds_count{cluster_queue="cq-a-kq0001"}' in metrics
    admitted = sum(float(line.split()[-1]) for line in metrics.splitlines()
                   if line.startswith("kueue_admitted_workloads_total{"))
    assert admitted == 30 + queue["preemptions"]  # readmissions after preemption count again
    assert 'kueue_cluster_queue_nominal_quota{cluster_queue="cq-b-kq0001",cohort="lab-kq0001"' in metrics


def test_queued_pytorchjobs_are_admitted_as_one_workload_each(api, tmp_path):
    case = ScaleCase(workload="distributed", jobs=6, workers=1, gpus=1, duration_s=0.5, timeout_s=120, queue=QUEUES)
    lifecycles = tuple(parse_lifecycles(["pytorchjob", {"builtin": "workload", "time": "observed"}], "test"))
    options = RunOptions(namespace_prefix="qd", plots=True, lifecycles=lifecycles)
    result = run_case(api, case, tmp_path, options, run_id="kq0002")
    assert result.summary["failed_jobs"]["total"] == 0 and not result.summary["timed_out"]
    workloads = json.loads((tmp_path / "sampled.json").read_text())["queue"]["workloads"]
    assert len(workloads) == 6 and {w["gpus"] for w in workloads} == {2.0}  # master + worker
    assert result.summary["queue"]["latency_ms"]["all"]["Finished"]["count"] == 6
    # the generic sampler, configured with the built-in lifecycles: each job and its Workload, step by step
    summary = result.summary["lifecycles"]
    assert summary["workload"]["objects"] == 6 and summary["pytorchjob"]["objects"] == 6
    assert list(summary["workload"]["transitions"]) == ["QuotaReserved->Admitted", "Admitted->Finished"]
    assert list(summary["pytorchjob"]["transitions"]) == ["Created->Running", "Running->Succeeded"]
    for lifecycle in summary.values():
        for transition in lifecycle["transitions"].values():
            assert transition["count"] == 6 and transition["errors"] == 0 and transition["P90"] is not None
    running = summary["pytorchjob"]["transitions"]["Running->Succeeded"]  # whole seconds (lastTransitionTime)
    assert running["P50"] % 1000 == 0 and running["max"] >= 0
    with (tmp_path / "lifecycle_workload.csv").open() as file:
        rows = list(csv.DictReader(file, skipinitialspace=True))
    assert len(rows) == 6 and all(float(r["Admitted_Finished_ms"]) >= 400 for r in rows)  # each job runs 0.5 s
    assert (tmp_path / "lifecycle_pytorchjob.html").is_file() and "lifecycle workload" in result.figures
    again = analyse_directory(tmp_path, plots=False)  # the replot: the same transitions from sampled.json
    assert again.summary["lifecycles"] == summary
