"""What real clients rely on, checked as a kube-apiserver 1.32 answers: dry-run deletes, filtered watches,
resourceVersion semantics, finalizers during deletion, dangling owners, namespace defaults, Service status."""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture(scope="module")
def core(api_sim: Any) -> client.CoreV1Api:
    return client.CoreV1Api(api_sim.api_client())


@pytest.fixture
def namespace(core: client.CoreV1Api) -> str:
    name = f"f-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def _status(error: ApiException) -> dict[str, Any]:
    return json.loads(error.body)


def _pod(name: str, labels: dict[str, str] | None = None, **metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}, **metadata},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


# ----------------------------------------------------------------- dry-run deletes
def test_dry_run_delete_of_an_object_leaves_it(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _pod("keep"))
    answered = core.delete_namespaced_pod("keep", namespace, dry_run="All")
    assert answered.metadata.name == "keep"
    assert core.read_namespaced_pod("keep", namespace).metadata.deletion_timestamp is None
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "held", "finalizers": ["example.com/x"]}})
    body = client.V1DeleteOptions(dry_run=["All"])  # the DeleteOptions body, as kubectl sends it
    held = json.loads(core.delete_namespaced_config_map("held", namespace, body=body, _preload_content=False).data)
    assert held["metadata"]["deletionTimestamp"]  # answered as if marked for deletion...
    assert core.read_namespaced_config_map("held", namespace).metadata.deletion_timestamp is None  # ...and not


def test_dry_run_delete_collection_deletes_nothing(core: client.CoreV1Api, namespace: str) -> None:
    for name in ("a", "b"):
        core.create_namespaced_pod(namespace, _pod(name, {"set": "dry"}))
    core.delete_collection_namespaced_pod(namespace, label_selector="set=dry", dry_run="All")
    assert [p.metadata.name for p in core.list_namespaced_pod(namespace).items] == ["a", "b"]


def test_dry_run_delete_with_a_bad_directive_is_rejected(api_sim: Any, namespace: str, core: client.CoreV1Api
                                                          ) -> None:
    core.create_namespaced_pod(namespace, _pod("p"))
    response = api_sim.raw("DELETE", f"/api/v1/namespaces/{namespace}/pods/p", json.dumps({"dryRun": ["Some"]}))
    assert response.status_code == 400 and response.json()["reason"] == "BadRequest"
    assert core.read_namespaced_pod("p", namespace)


@needs_kubectl
def test_kubectl_delete_namespace_dry_run_server_leaves_it(api_sim: Any, core: client.CoreV1Api,
                                                           namespace: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "content"}})
    result = api_sim.kubectl("delete", "namespace", namespace, "--dry-run=server")
    assert f'namespace "{namespace}" deleted (server dry run)' in result.stdout
    ns = core.read_namespace(namespace)
    assert ns.status.phase == "Active" and ns.metadata.deletion_timestamp is None
    assert core.read_namespaced_config_map("content", namespace)
    pod_result = api_sim.kubectl("delete", "configmap", "content", "-n", namespace, "--dry-run=server")
    assert "(server dry run)" in pod_result.stdout
    assert core.read_namespaced_config_map("content", namespace)


# ----------------------------------------------------------------- filtered watches
def test_watch_with_a_selector_sees_objects_enter_and_leave(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _pod("mover", {"stage": "a"}))
    start = core.list_namespaced_pod(namespace).metadata.resource_version
    seen: list[tuple[str, str, str]] = []

    def collect() -> None:
        stream = watch.Watch()
        for event in stream.stream(core.list_namespaced_pod, namespace, label_selector="stage=b",
                                   resource_version=start, timeout_seconds=60):  # stopped at the 3rd event
            seen.append((event["type"], event["object"].metadata.name, event["object"].metadata.labels["stage"]))
            if len(seen) == 3:
                stream.stop()

    thread = threading.Thread(target=collect)
    thread.start()  # the watch replays from `start`: the patches may come before it connects
    core.patch_namespaced_pod("mover", namespace, {"metadata": {"labels": {"stage": "b"}}})   # enters: ADDED
    core.patch_namespaced_pod("mover", namespace, {"metadata": {"annotations": {"x": "1"}}})  # stays: MODIFIED
    core.patch_namespaced_pod("mover", namespace, {"metadata": {"labels": {"stage": "c"}}})   # leaves: DELETED
    thread.join(60)
    # the DELETED event carries the last state that matched, as the watch cache sends it
    assert seen == [("ADDED", "mover", "b"), ("MODIFIED", "mover", "b"), ("DELETED", "mover", "b")]
    assert core.read_namespaced_pod("mover", namespace)  # it was never deleted


def test_resumed_field_selector_watch_replays_entering_as_added(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _pod("runner"))
    start = core.list_namespaced_pod(namespace).metadata.resource_version
    core.patch_namespaced_pod_status("runner", namespace, {"status": {"phase": "Running"}})
    core.patch_namespaced_pod_status("runner", namespace, {"status": {"phase": "Succeeded"}})
    events = [(e["type"], e["object"].status.phase) for e in watch.Watch().stream(
        core.list_namespaced_pod, namespace, field_selector="status.phase=Running", resource_version=start,
        timeout_seconds=1)]
    assert events == [("ADDED", "Running"), ("DELETED", "Running")]


# ----------------------------------------------------------------- resourceVersion semantics
def test_list_exact_resource_version_shows_the_past(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "v"}, "data": {"n": "1"}})
    then = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.patch_namespaced_config_map("v", namespace, {"data": {"n": "2"}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "w"}})
    past = core.list_namespaced_config_map(namespace, resource_version=then, resource_version_match="Exact")
    assert past.metadata.resource_version == then
    assert {c.metadata.name: (c.data or {}).get("n") for c in past.items} == {"kube-root-ca.crt": None, "v": "1"}


def test_list_exact_of_a_version_older_than_the_log_is_gone(tmp_path_factory: pytest.TempPathFactory,
                                                             start_sim: Any, no_controllers: list[str]) -> None:
    for sim in start_sim(tmp_path_factory, "small-log-sim", controllers=no_controllers, watch_log_size=5):
        small = client.CoreV1Api(sim.api_client())
        first = small.create_namespaced_config_map("default", {"metadata": {"name": "c0"}})
        for index in range(1, 8):
            small.create_namespaced_config_map("default", {"metadata": {"name": f"c{index}"}})
        with pytest.raises(ApiException) as error:
            small.list_namespaced_config_map("default", resource_version=first.metadata.resource_version,
                                             resource_version_match="Exact")
        status = _status(error.value)
        assert (error.value.status, status["reason"]) == (410, "Expired")
        assert status["message"] == "The resourceVersion for the provided list is too old."


def test_list_of_a_future_resource_version_times_out_with_504(core: client.CoreV1Api) -> None:
    future = str(int(core.list_namespace().metadata.resource_version) + 1_000_000)
    started = time.monotonic()
    with pytest.raises(ApiException) as error:
        core.list_namespace(resource_version=future, resource_version_match="NotOlderThan")
    assert time.monotonic() - started >= 2.5  # the apiserver waits for the version before giving up
    status = _status(error.value)
    assert (error.value.status, status["reason"]) == (504, "Timeout")
    assert status["message"].startswith(f"Too large resource version: {future}, current: ")
    assert status["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_resource_version_match_without_resource_version_is_invalid(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as error:
        core.list_namespace(resource_version_match="Exact")
    status = _status(error.value)
    assert error.value.status == 422
    assert status["message"] == ('ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                                 "resourceVersionMatch is forbidden unless resourceVersion is provided")
    assert status["details"]["causes"][0]["reason"] == "FieldValueForbidden"


def test_send_initial_events_ends_with_the_initial_events_end_bookmark(core: client.CoreV1Api,
                                                                       namespace: str) -> None:
    for name in ("one", "two"):
        core.create_namespaced_config_map(namespace, {"metadata": {"name": name}})
    events = list(watch.Watch().stream(core.list_namespaced_config_map, namespace, send_initial_events=True,
                                       resource_version_match="NotOlderThan", allow_watch_bookmarks=True,
                                       timeout_seconds=1))
    kinds = [e["type"] for e in events]
    assert kinds[:3] == ["ADDED", "ADDED", "ADDED"] and kinds[3] == "BOOKMARK"
    bookmark = events[3]["raw_object"]
    assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    with pytest.raises(ApiException) as error:  # sendInitialEvents needs resourceVersionMatch=NotOlderThan
        list(watch.Watch().stream(core.list_namespaced_config_map, namespace, send_initial_events=True,
                                  timeout_seconds=1))
    assert error.value.status == 422


# ----------------------------------------------------------------- finalizers and owners
def test_finalizer_added_during_deletion_is_forbidden(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "going", "finalizers": ["example.com/a"]}})
    core.delete_namespaced_config_map("going", namespace)
    with pytest.raises(ApiException) as error:
        core.patch_namespaced_config_map("going", namespace, {"metadata": {"finalizers": ["example.com/b"]}})
    status = _status(error.value)
    assert (error.value.status, status["reason"]) == (422, "Invalid")
    assert status["message"] == ('ConfigMap "going" is invalid: metadata.finalizers: Forbidden: no new finalizers '
                                 'can be added if the object is being deleted, found new finalizers '
                                 '[]string{"example.com/b"}')
    removed = core.patch_namespaced_config_map("going", namespace, {"metadata": {"$deleteFromPrimitiveList/finalizers":
                                                                                ["example.com/a"]}})
    assert removed is not None


def test_dependent_of_an_owner_that_never_existed_is_collected(core: client.CoreV1Api, namespace: str,
                                                               wait_until: Any) -> None:
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": str(uuid.uuid4())}
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "orphan", "ownerReferences": [ghost]}})
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    real = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "half", "ownerReferences": [ghost, real]}})

    def names() -> list[str]:
        return [c.metadata.name for c in core.list_namespaced_config_map(namespace).items]

    wait_until(lambda: "orphan" not in names(), 30, "the dependent of a missing owner to be collected")
    half = core.read_namespaced_config_map("half", namespace)
    assert [ref.name for ref in half.metadata.owner_references] == ["owner"]  # the dangling reference removed


# ----------------------------------------------------------------- namespace defaults and shapes
def test_every_namespace_has_the_default_service_account_and_root_ca(core: client.CoreV1Api,
                                                                     namespace: str) -> None:
    assert core.read_namespaced_service_account("default", namespace).metadata.name == "default"
    root_ca = core.read_namespaced_config_map("kube-root-ca.crt", namespace)
    assert root_ca.data["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")
    assert core.read_namespaced_service_account("default", "kube-system")
    service = core.read_namespaced_service("kubernetes", "default")
    assert service.spec.cluster_ip == "10.96.0.1" and service.spec.ports[0].port == 443


def test_service_has_a_status(core: client.CoreV1Api, namespace: str) -> None:
    service = core.create_namespaced_service(namespace, {"metadata": {"name": "svc"}, "spec": {
        "selector": {"app": "x"}, "ports": [{"port": 80}]}})
    assert service.status.load_balancer is not None
    assert service.status.load_balancer.ingress is None
