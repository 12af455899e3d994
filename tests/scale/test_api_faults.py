"""With 5% of all API requests answered 503, scale runs leave nothing on the cluster: every request of the engine
(watches, submission, cleanup, its verification) goes through the retries of the one Kubernetes layer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_topsail.kube.client import Kube, ObjectRef, connect
from pytest_topsail.kube.retry import RetryPolicy
from pytest_topsail.scale.run import RunOptions, ScaleCase, run_case
from pytest_topsail.scale.workloads import RUN_LABEL
from pytest_topsail.sim.run.launcher import SimCluster

RUNS = 20
DEFAULT_NAMESPACE = ObjectRef("v1", "Namespace", "default")


@pytest.fixture(scope="module")
def flaky_cluster() -> Iterator[Kube]:
    profile = {"node_pools": [{"name": "gpu", "count": 4, "gpu_profile": "a100"}], "preinstalled": ["all"],
               "faults": {"api": [{"verb": "*", "resource": "*", "error_rate": 0.05, "code": 503}]}}
    with SimCluster(profile, seed=5) as sim:
        kube = connect(sim.kubeconfig_path, pool_size=16)
        kube.retry = RetryPolicy(max_retry_after_s=0.1)  # the simulator asks for 1 s: shortened, rules unchanged
        yield kube
        kube.close()


@pytest.mark.parametrize("run", range(RUNS))
def test_a_run_with_5_percent_503_leaves_nothing(flaky_cluster: Kube, tmp_path, run: int) -> None:
    case = ScaleCase(workload="training", jobs=4, gpus=1, duration_s=0.2, parallelism=4, timeout_s=60)
    run_id = f"flaky{run:02d}"
    result = run_case(flaky_cluster, case, tmp_path, RunOptions(namespace_prefix="f", plots=False,
                                                                cleanup_timeout_s=30), run_id=run_id)
    cleanup = result.summary["cleanup"]
    assert cleanup.get("remaining") == [] and "error" not in cleanup, cleanup
    left = [ns["metadata"]["name"] for ns in flaky_cluster.list("v1", "Namespace", label_selector=f"{RUN_LABEL}="
                                                                                                   f"{run_id}")]
    assert left == []
    assert result.summary["failed_jobs"]["total"] == 0 and not result.summary["timed_out"], result.summary


def test_the_faults_were_really_injected(flaky_cluster: Kube) -> None:
    """Whichever runs came first on this xdist worker (maybe none: the module is not one group): 200 reads through the
    flaky cluster all succeed, some of them only when sent again (0.95 ** 200: one chance in 30,000 of no 503)."""
    before = flaky_cluster.retried
    for _ in range(200):
        assert (flaky_cluster.get(DEFAULT_NAMESPACE) or {}).get("metadata", {}).get("name") == "default"
    assert flaky_cluster.retried > before


def test_submit_errors_show_the_apis_reason_in_the_summary(tmp_path) -> None:
    profile = {"node_pools": [{"name": "gpu", "count": 1, "gpu_profile": "a100"}], "preinstalled": ["all"],
               "faults": {"api": [{"verb": "create", "resource": "batch/jobs", "error_rate": 1.0, "code": 500}]}}
    with SimCluster(profile, seed=5) as sim:
        kube = connect(sim.kubeconfig_path)
        case = ScaleCase(workload="training", jobs=2, gpus=1, timeout_s=10)
        result = run_case(kube, case, tmp_path, RunOptions(namespace_prefix="e", plots=False), run_id="err001")
        kube.close()
    assert result.summary["failed_jobs"]["submit"] == 2
    errors = result.summary["submit_errors"]
    assert len(errors) == 2 and "simulated fault: create jobs.batch failed with 500" in errors[0], errors
    assert "HTTP 500 InternalError from https://127.0.0.1:" in errors[0] and "kubeconfig" in errors[0], errors


def test_a_cluster_that_goes_away_mid_run_ends_the_wait_at_once(tmp_path) -> None:
    import threading
    import time

    from pytest_topsail.leftovers import collecting

    sim = SimCluster({"node_pools": [{"name": "gpu", "count": 1, "gpu_profile": "a100"}], "preinstalled": ["all"]},
                     seed=5)
    sim.start()
    kube = connect(sim.kubeconfig_path)
    kube.retry = RetryPolicy(max_attempts=2)
    threading.Timer(2.0, sim.stop).start()
    case = ScaleCase(workload="training", jobs=2, gpus=1, duration_s=600, timeout_s=900)  # far beyond the bound
    started = time.monotonic()
    leftovers: list[dict[str, str]] = []
    with collecting(leftovers):
        result = run_case(kube, case, tmp_path, RunOptions(namespace_prefix="g", plots=False), run_id="gone01")
    kube.close()
    assert time.monotonic() - started < 120, "the wait ended when the cluster stopped answering, not at timeout_s"
    lost = result.summary["cluster_lost"]
    assert lost.startswith("the cluster stopped answering while the jobs ran: "), result.summary
    assert "connection refused" in result.summary["cluster_lost"] and not result.summary["timed_out"]
    assert [entry["what"].split()[1] for entry in leftovers] == ["g-gone01-0"]
