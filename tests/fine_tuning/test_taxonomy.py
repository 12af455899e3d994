"""The failure taxonomy of a point from the states of its pods (the classes the simulator cannot produce: image pull,
OOMKilled; the others are exercised on the simulator by test_fine_tuning_suite.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.fine_tuning.estimate import MemoryEstimate
from pytest_topsail.fine_tuning.point import validate_point
from pytest_topsail.fine_tuning.run import PointFailure, PointRun
from pytest_topsail.fine_tuning.settings import validate_suite


class LogsOnly:
    """Answers pod log requests only (what the classification reads from the API)."""

    def __init__(self, logs: dict[str, str]) -> None:
        self.logs = logs

    def request(self, method: str, path: str, **kwargs: Any) -> str:
        return self.logs.get(path.split("/pods/")[1].split("/")[0], "")

    def list(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return []  # no Event names a cluster fault


def pod(name: str, state: dict[str, Any], limits: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"containers": [{"name": "pytorch", "resources": {"limits": limits or {}}}]},
            "status": {"containerStatuses": [{"name": "pytorch", "image": "quay.io/x/y:bad", "state": state}]}}


def point_run(logs: dict[str, str] | None = None) -> PointRun:
    return PointRun(LogsOnly(logs or {}), "ns", "ft-1", validate_point({}, "test"),  # type: ignore[arg-type]
                    validate_suite({}, "test"), Path("."), lambda message: None,
                    MemoryEstimate(10.0, 5.0, 2.0), 80.0)


def test_image_pull_backoff_names_the_image():
    with pytest.raises(PointFailure) as failure:
        point_run()._check_pods([pod("ft-1-master-0", {"waiting": {"reason": "ImagePullBackOff",
                                                                   "message": "Back-off pulling image"}})])
    assert failure.value.kind == "image pull"
    assert "pod ft-1-master-0 cannot pull image 'quay.io/x/y:bad': ImagePullBackOff" in str(failure.value)


def test_oomkilled_names_the_limit_and_the_estimate():
    killed = pod("ft-1-master-0", {"terminated": {"reason": "OOMKilled", "exitCode": 137}}, {"memory": "8Gi"})
    failure = point_run()._failure(None, [killed])
    assert failure.kind == "OOMKilled"
    assert "(memory limit 8Gi)" in str(failure) and "memory estimate 17.0 GiB per GPU" in str(failure)


def test_cuda_oom_in_a_worker_log_wins_over_the_exit_code():
    master = pod("ft-1-master-0", {"terminated": {"reason": "Error", "exitCode": 1}})
    worker = pod("ft-1-worker-0", {"terminated": {"reason": "Error", "exitCode": 1}})
    log = "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried 2 GiB\n"
    failure = point_run({"ft-1-worker-0": log})._failure(None, [master, worker])
    assert failure.kind == "CUDA out of memory"
    assert "pod ft-1-worker-0" in str(failure) and "GPU memory 80.0 GiB" in str(failure)


def test_other_exits_show_the_code_and_the_last_lines():
    master = pod("ft-1-master-0", {"terminated": {"reason": "Error", "exitCode": 2}})
    failure = point_run({"ft-1-master-0": "loading\nValueError: bad config key\n"})._failure(None, [master])
    assert failure.kind == "exit code"
    assert "exit code 2 (Error)" in str(failure) and "ValueError: bad config key" in str(failure)
