"""Model load time in the cluster's time: the simulator's model-load stage, else the pod's own timestamps."""

from __future__ import annotations

from pytest_topsail.tgis.load_time import pod_load_seconds


def pod(annotations: dict[str, str] | None = None, created: str = "2026-11-25T07:00:00Z",
        ready: str | None = None) -> dict:
    conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": ready}] if ready else []
    return {"metadata": {"annotations": annotations or {}, "creationTimestamp": created},
            "status": {"conditions": conditions}}


def test_on_the_simulator_it_is_the_simulated_download_and_load_stage() -> None:
    simulated = pod({"sim.topsail.io/initialize-delay-ms": "600", "sim.topsail.io/ready-delay-ms": "3267"},
                    ready="2026-11-25T07:00:09Z")  # the wall clock said 9 s on a loaded machine: not used
    assert pod_load_seconds(simulated) == 3.867


def test_on_a_real_cluster_it_is_ready_time_minus_creation_time() -> None:
    assert pod_load_seconds(pod(ready="2026-11-25T07:01:05Z")) == 65.0


def test_a_pod_that_tells_nothing_gives_no_value() -> None:
    assert pod_load_seconds(pod()) is None
    assert pod_load_seconds({}) is None
    assert pod_load_seconds(pod({"sim.topsail.io/ready-delay-ms": "soon"})) is None
