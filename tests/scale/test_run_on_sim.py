"""The scale library end to end against the simulator (one simulator process for the module)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.kube.client import Kube, ObjectRef, connect
from pytest_topsail.kube.namespaces import create_namespace, namespace_exists
from pytest_topsail.scale.latency import lifecycle_stats
from pytest_topsail.scale.lifecycle import Lifecycle, builtin
from pytest_topsail.scale.run import RunOptions, ScaleCase, run_case
from pytest_topsail.scale.sampler import Sampler
from pytest_topsail.scale.timelines import lifecycle_timelines
from pytest_topsail.sim.run.launcher import SimCluster


@pytest.fixture(scope="module")
def api() -> Iterator[Kube]:
    with SimCluster({"preinstalled": ["all"]}, nodes=4, gpu_profile="a100", seed=3) as sim:
        kube = connect(sim.kubeconfig_path, pool_size=8)
        yield kube
        kube.close()


def test_distributed_jobs_with_pvcs_are_timed_to_ready_and_cleaned_up(api, tmp_path):
    case = ScaleCase(workload="distributed", jobs=3, workers=2, gpus=1, pvc=True, parallelism=4, timeout_s=30)
    result = run_case(api, case, tmp_path, RunOptions(namespace_prefix="t", plots=False), run_id="abc123")
    assert result.summary["failed_jobs"]["total"] == 0 and not result.summary["timed_out"]
    assert result.summary["pods"] == 9
    submitted = json.loads((tmp_path / "submitted.json").read_text())
    assert submitted["requests"] == 6  # a PVC then a PyTorchJob per job
    ready = next(s for s in result.stats if s.level == "job" and s.source == "watch" and s.step == "Ready")
    scheduled = next(s for s in result.stats if s.level == "job" and s.source == "watch" and s.step == "Scheduled")
    assert ready.errors == 0 and ready.P50 is not None and ready.P50 >= scheduled.P50 > 0
    cleanup = json.loads((tmp_path / "cleanup.json").read_text())
    assert cleanup["deleted"] == ["t-abc123-0"] and not namespace_exists(api, "t-abc123-0")


def test_kept_namespaces_stay(api, tmp_path):
    case = ScaleCase(workload="interactive", jobs=2, timeout_s=30)
    run_case(api, case, tmp_path, RunOptions(namespace_prefix="k", keep=True, plots=False), run_id="keep01")
    assert namespace_exists(api, "k-keep01-0")
    pods = api.list("v1", "Pod", namespace="k-keep01-0")
    assert len(pods) == 2


def test_sampling_a_kind_the_cluster_does_not_serve_fails_fast_naming_it(api):
    widget = Lifecycle(name="widget", api_version="example.com/v1", kind="Widget", steps=[
        {"name": "Ready", "condition": "Ready"}])
    sampler = Sampler(api, ["default"], [widget])
    started = time.monotonic()
    with pytest.raises(TopsailError, match="cannot list Widget: 404"):
        sampler.start(timeout_s=120)
    assert time.monotonic() - started < 60  # at once (< 1 s quiet), not at timeout_s


def test_pods_no_node_can_hold_fail_the_run_in_seconds_naming_request_and_reason(api, tmp_path):
    """16 GPUs per pod on 8-GPU nodes: the scheduler's reason and the request are named long before timeout_s."""
    case = ScaleCase(workload="training", jobs=2, gpus=16, timeout_s=300)
    started = time.monotonic()
    result = run_case(api, case, tmp_path, RunOptions(namespace_prefix="u", plots=False), run_id="unsch1")
    assert time.monotonic() - started < 120, "stopped by the unschedulable check (seconds), not by timeout_s (300 s)"
    message = result.summary["unschedulable"]
    assert "can never be scheduled" in message and "nvidia.com/gpu=16" in message, message
    assert "Insufficient nvidia.com/gpu" in message, message
    assert "largest node it may use has 8 allocatable" in message, message
    assert not result.summary["timed_out"] and result.summary["failed_jobs"]["total"] == 2
    assert json.loads((tmp_path / "sampled.json").read_text())["unschedulable"] == message
    assert not namespace_exists(api, "u-unsch1-0")


def test_pods_waiting_for_room_are_not_judged_unschedulable(api, tmp_path):
    """More GPU pods than free GPUs (4 nodes x 8): the last ones wait for room, and get it."""
    case = ScaleCase(workload="training", jobs=5, gpus=8, duration_s=0.5, timeout_s=60)
    result = run_case(api, case, tmp_path, RunOptions(namespace_prefix="r", plots=False), run_id="room01")
    assert result.summary["unschedulable"] is None
    assert result.summary["failed_jobs"]["total"] == 0 and not result.summary["timed_out"]


def test_a_namespace_that_stays_is_reported_with_the_command_removing_it(api, tmp_path):
    from pytest_topsail.kube.client import ObjectRef
    from pytest_topsail.leftovers import collecting

    held = "h-held01-0"  # the run's namespace, created beforehand with a finalizer nobody removes
    api.create({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": held, "finalizers": ["example.com/hold"]}})
    leftovers: list[dict[str, str]] = []
    with collecting(leftovers):
        result = run_case(api, ScaleCase(workload="interactive", jobs=1, timeout_s=30), tmp_path,
                          RunOptions(namespace_prefix="h", plots=False, cleanup_timeout_s=1), run_id="held01")
    assert result.summary["cleanup"]["remaining"] == [held]
    [entry] = leftovers
    assert entry["what"].startswith(f"namespace {held} (not seen gone within 1 s of its deletion)")
    assert entry["command"] == f"kubectl --kubeconfig {api.kubeconfig} delete namespace {held}"
    api.patch(ObjectRef("v1", "Namespace", held), {"metadata": {"finalizers": None}})


def test_the_generic_sampler_times_an_inferenceservice_from_its_conditions(api):
    """A kind the scale run never creates: the built-in inferenceservice lifecycle, the statuses written as KServe's
    controller does (the simulator serves the CRD, no controller), PredictorReady then Ready 1 s later."""
    namespace = "isvc-lc"
    create_namespace(api, namespace, {})
    sampler = Sampler(api, [namespace], [builtin("inferenceservice")])
    sampler.start()
    try:
        for index in range(3):
            name = f"model-{index}"
            api.create({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                        "metadata": {"name": name, "namespace": namespace},
                        "spec": {"predictor": {"model": {"modelFormat": {"name": "pytorch"}}}}})
            ref = ObjectRef("serving.kserve.io/v1beta1", "InferenceService", name, namespace)
            predictor = {"type": "PredictorReady", "status": "True",
                         "lastTransitionTime": f"2026-01-01T00:00:0{index}Z"}
            ready = {"type": "Ready", "status": "True", "lastTransitionTime": f"2026-01-01T00:00:0{index + 1}Z"}
            api.patch(ref, {"status": {"conditions": [predictor]}}, subresource="status")
            api.patch(ref, {"status": {"conditions": [predictor, ready]}}, subresource="status")
        assert sampler.wait_for_lifecycles(["inferenceservice"], 10.0)
    finally:
        sampler.stop()
    objects = sampler.snapshot()["lifecycles"]["inferenceservice"]["objects"]
    lifecycle = builtin("inferenceservice")
    (stats,) = lifecycle_stats(lifecycle, lifecycle_timelines(lifecycle, objects))
    assert stats.step == "PredictorReady->Ready" and stats.count == 3 and stats.errors == 0
    assert stats.P50 == stats.max == 1000.0  # the lastTransitionTimes, one second apart
