"""With the controllers running: core/v1 Events and the pod log subresource, through the official client."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException


@pytest.fixture(scope="module")
def core(cluster_sim: Any) -> client.CoreV1Api:
    return client.CoreV1Api(cluster_sim.api_client())


@pytest.fixture
def namespace(core: client.CoreV1Api) -> str:
    name = f"c-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def _pod(name: str, script: str, restart: str = "Never") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"restartPolicy": restart, "containers": [
        {"name": "main", "image": "busybox", "command": ["sh", "-c", script]}]}}


def _wait_phase(core: client.CoreV1Api, namespace: str, name: str, phases: set[str]) -> Any:
    stream = watch.Watch()
    for event in stream.stream(core.list_namespaced_pod, namespace, field_selector=f"metadata.name={name}",
                               timeout_seconds=20):
        if event["object"].status.phase in phases:
            stream.stop()
            return event["object"]
    raise AssertionError(f"pod {namespace}/{name} did not reach {phases} within 20 s")


def test_scheduling_and_start_events(core: client.CoreV1Api, namespace: str, wait_until: Any) -> None:
    core.create_namespaced_pod(namespace, _pod("evented", "echo hi; sleep infinity"))
    _wait_phase(core, namespace, "evented", {"Running"})

    def reasons() -> list[str]:
        events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=evented").items
        return [e.reason for e in events]

    found = wait_until(lambda: {"Scheduled", "Started"} <= set(reasons()) and reasons(), what="pod events")
    assert "Scheduled" in found
    scheduled = next(e for e in core.list_namespaced_event(namespace).items if e.reason == "Scheduled")
    assert scheduled.involved_object.kind == "Pod" and scheduled.involved_object.name == "evented"
    assert scheduled.event_time is not None and scheduled.type == "Normal"


def test_unschedulable_pod_gets_a_failed_scheduling_event(core: client.CoreV1Api, namespace: str,
                                                          wait_until: Any) -> None:
    pod = _pod("too-big", "sleep infinity")
    pod["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "64"},
                                                 "limits": {"nvidia.com/gpu": "64"}}
    core.create_namespaced_pod(namespace, pod)
    event = wait_until(lambda: next((e for e in core.list_namespaced_event(namespace).items
                                     if e.reason == "FailedScheduling"), None), what="FailedScheduling event")
    assert event.type == "Warning"
    condition = next(c for c in core.read_namespaced_pod("too-big", namespace).status.conditions
                     if c.type == "PodScheduled")
    assert (condition.status, condition.reason) == ("False", "Unschedulable")


def test_log_of_a_finished_container(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _pod("logger", "echo one; echo two; sleep 0.1; echo three"))
    finished = _wait_phase(core, namespace, "logger", {"Succeeded", "Failed"})
    assert finished.status.phase == "Succeeded"
    assert core.read_namespaced_pod_log("logger", namespace) == "one\ntwo\nthree\n"
    assert core.read_namespaced_pod_log("logger", namespace, tail_lines=1) == "three\n"
    assert core.read_namespaced_pod_log("logger", namespace, container="main") == "one\ntwo\nthree\n"


def test_log_follow_ends_with_the_container(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _pod("follower", "echo start; sleep 0.5; echo end"))
    _wait_phase(core, namespace, "follower", {"Running", "Succeeded"})
    response = core.read_namespaced_pod_log("follower", namespace, follow=True, _preload_content=False,
                                            _request_timeout=20)
    assert response.data.decode() == "start\nend\n"


def test_failing_container_exit_code(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _pod("failing", "echo oops; exit 3"))
    failed = _wait_phase(core, namespace, "failing", {"Failed", "Succeeded"})
    assert failed.status.phase == "Failed"
    assert failed.status.container_statuses[0].state.terminated.exit_code == 3


def test_log_errors(core: client.CoreV1Api, namespace: str) -> None:
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_pod_log("nobody", namespace)
    assert missing.value.status == 404
    core.create_namespaced_pod(namespace, _pod("one-container", "sleep infinity"))
    with pytest.raises(ApiException) as wrong:
        core.read_namespaced_pod_log("one-container", namespace, container="other")
    assert wrong.value.status == 400
