"""Typed APIs of the official client: CRUD, optimistic concurrency, the three patch types, /status, selectors."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException


@pytest.fixture(scope="module")
def core(api_sim: Any) -> client.CoreV1Api:
    return client.CoreV1Api(api_sim.api_client())


@pytest.fixture(scope="module")
def apps(api_sim: Any) -> client.AppsV1Api:
    return client.AppsV1Api(api_sim.api_client())


@pytest.fixture
def namespace(core: client.CoreV1Api) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def _pod(name: str, labels: dict[str, str] | None = None, containers: tuple[str, ...] = ("main",)) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": c, "image": "busybox"} for c in containers]}}


def test_create_sets_identity_fields_and_defaults(core: client.CoreV1Api, namespace: str) -> None:
    created = core.create_namespaced_pod(namespace, _pod("p"))
    metadata = created.metadata
    assert uuid.UUID(metadata.uid)
    assert int(metadata.resource_version) > 0
    assert metadata.creation_timestamp is not None
    assert metadata.generation == 1
    assert metadata.namespace == namespace
    assert created.status.phase == "Pending"
    assert created.spec.restart_policy == "Always"


def test_read_list_replace_delete(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    read = core.read_namespaced_config_map("cm", namespace)
    assert read.data == {"a": "1"}
    listed = core.list_namespaced_config_map(namespace)
    assert [c.metadata.name for c in listed.items] == ["cm", "kube-root-ca.crt"]  # every namespace has the CA
    assert int(listed.metadata.resource_version) >= int(read.metadata.resource_version)
    read.data = {"a": "2"}
    replaced = core.replace_namespaced_config_map("cm", namespace, read)
    assert replaced.data == {"a": "2"}
    assert int(replaced.metadata.resource_version) > int(read.metadata.resource_version)
    core.delete_namespaced_config_map("cm", namespace)
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("cm", namespace)
    assert missing.value.status == 404


def test_generate_name(core: client.CoreV1Api, namespace: str) -> None:
    first = core.create_namespaced_config_map(namespace, {"metadata": {"generateName": "gen-"}})
    second = core.create_namespaced_config_map(namespace, {"metadata": {"generateName": "gen-"}})
    assert first.metadata.name.startswith("gen-") and second.metadata.name.startswith("gen-")
    assert first.metadata.name != second.metadata.name


def test_create_twice_is_409_already_exists(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "dup"}})
    with pytest.raises(ApiException) as conflict:
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "dup"}})
    assert conflict.value.status == 409
    assert '"reason":"AlreadyExists"' in conflict.value.body.replace(" ", "")


def test_stale_put_is_409_conflict(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "occ"}, "data": {"v": "0"}})
    first = core.read_namespaced_config_map("occ", namespace)
    second = core.read_namespaced_config_map("occ", namespace)
    first.data = {"v": "1"}
    core.replace_namespaced_config_map("occ", namespace, first)
    second.data = {"v": "2"}
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_config_map("occ", namespace, second)
    assert conflict.value.status == 409
    assert "Conflict" in conflict.value.body
    assert core.read_namespaced_config_map("occ", namespace).data == {"v": "1"}


def test_strategic_merge_patch_merges_containers_by_name(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _pod("smp", containers=("a", "b")))
    patched = core.patch_namespaced_pod("smp", namespace, {"spec": {"containers": [{"name": "b", "image": "v2"}]}})
    assert [(c.name, c.image) for c in patched.spec.containers] == [("a", "busybox"), ("b", "v2")]


def test_json_patch(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "jp"}, "data": {"a": "1", "b": "2"}})
    patched = core.patch_namespaced_config_map("jp", namespace, [
        {"op": "remove", "path": "/data/a"}, {"op": "add", "path": "/data/c", "value": "3"},
        {"op": "test", "path": "/data/b", "value": "2"}])
    assert patched.data == {"b": "2", "c": "3"}
    with pytest.raises(ApiException) as failed:
        core.patch_namespaced_config_map("jp", namespace, [{"op": "test", "path": "/data/b", "value": "9"}])
    assert failed.value.status in (409, 422)


def test_merge_patch_replaces_lists(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _pod("mp", labels={"keep": "1", "drop": "1"}, containers=("a", "b")))
    patched = core.patch_namespaced_pod(
        "mp", namespace, {"metadata": {"labels": {"drop": None}}, "spec": {"containers": [{"name": "c",
                                                                                            "image": "x"}]}},
        _content_type="application/merge-patch+json")
    assert patched.metadata.labels == {"keep": "1"}
    assert [c.name for c in patched.spec.containers] == ["c"]


def test_status_subresource(core: client.CoreV1Api, namespace: str) -> None:
    pod = core.create_namespaced_pod(namespace, _pod("st"))
    pod.status.phase = "Running"
    pod.metadata.labels = {"changed": "yes"}
    updated = core.replace_namespaced_pod("st", namespace, pod)
    assert updated.status.phase == "Pending"  # status is ignored by an ordinary update
    assert updated.metadata.labels == {"changed": "yes"}
    status = core.patch_namespaced_pod_status("st", namespace, {"status": {"phase": "Running"},
                                                                "metadata": {"labels": {"ignored": "yes"}}})
    assert status.status.phase == "Running"
    assert status.metadata.labels == {"changed": "yes"}  # only status changes through /status


def test_generation_follows_spec_changes(apps: client.AppsV1Api, namespace: str) -> None:
    deployment = {"metadata": {"name": "d"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    created = apps.create_namespaced_deployment(namespace, deployment)
    labelled = apps.patch_namespaced_deployment("d", namespace, {"metadata": {"labels": {"x": "y"}}})
    scaled = apps.patch_namespaced_deployment("d", namespace, {"spec": {"replicas": 3}})
    assert (created.metadata.generation, labelled.metadata.generation, scaled.metadata.generation) == (1, 1, 2)


def test_label_selectors(core: client.CoreV1Api, namespace: str) -> None:
    for name, labels in (("a", {"tier": "web", "env": "prod"}), ("b", {"tier": "db", "env": "prod"}),
                         ("c", {"tier": "web"}), ("d", {})):
        core.create_namespaced_config_map(namespace, {"metadata": {"name": name, "labels": labels}})

    def names(selector: str) -> list[str]:
        return [c.metadata.name for c in core.list_namespaced_config_map(namespace, label_selector=selector).items]

    assert names("tier=web") == ["a", "c"]
    assert names("tier==web,env=prod") == ["a"]
    assert names("tier!=web") == ["b", "d", "kube-root-ca.crt"]
    assert names("tier in (db, web)") == ["a", "b", "c"]
    assert names("tier notin (web)") == ["b", "d", "kube-root-ca.crt"]
    assert names("env") == ["a", "b"]
    assert names("!env") == ["c", "d", "kube-root-ca.crt"]


def test_field_selectors(core: client.CoreV1Api, namespace: str) -> None:
    for name in ("one", "two"):
        core.create_namespaced_pod(namespace, _pod(name))
    core.patch_namespaced_pod_status("two", namespace, {"status": {"phase": "Running"}})
    by_name = core.list_namespaced_pod(namespace, field_selector="metadata.name=one").items
    assert [p.metadata.name for p in by_name] == ["one"]
    running = core.list_pod_for_all_namespaces(field_selector=f"status.phase=Running,metadata.namespace={namespace}")
    assert [p.metadata.name for p in running.items] == ["two"]
    not_running = core.list_namespaced_pod(namespace, field_selector="status.phase!=Running").items
    assert [p.metadata.name for p in not_running] == ["one"]


def test_cluster_scoped_resources(core: client.CoreV1Api) -> None:
    name = f"pv-{uuid.uuid4().hex[:6]}"
    core.create_persistent_volume({"metadata": {"name": name}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp"}}})
    assert core.read_persistent_volume(name).metadata.namespace is None
    core.delete_persistent_volume(name)
    with pytest.raises(ApiException) as missing:
        core.read_persistent_volume(name)
    assert missing.value.status == 404


def test_delete_collection_by_label(core: client.CoreV1Api, namespace: str) -> None:
    for name, group in (("x1", "x"), ("x2", "x"), ("y1", "y")):
        core.create_namespaced_config_map(namespace, {"metadata": {"name": name, "labels": {"group": group}}})
    core.delete_collection_namespaced_config_map(namespace, label_selector="group=x")
    assert [c.metadata.name for c in core.list_namespaced_config_map(namespace).items] == ["kube-root-ca.crt", "y1"]


def test_list_pages_with_limit_and_continue(core: client.CoreV1Api, namespace: str) -> None:
    for index in range(5):
        core.create_namespaced_config_map(namespace, {"metadata": {"name": f"page-{index}"}})
    core.delete_namespaced_config_map("kube-root-ca.crt", namespace)
    first = core.list_namespaced_config_map(namespace, limit=2)
    assert [c.metadata.name for c in first.items] == ["page-0", "page-1"]
    assert first.metadata.remaining_item_count == 3
    second = core.list_namespaced_config_map(namespace, limit=2, _continue=first.metadata._continue)
    third = core.list_namespaced_config_map(namespace, limit=2, _continue=second.metadata._continue)
    assert [c.metadata.name for c in second.items + third.items] == ["page-2", "page-3", "page-4"]
    assert third.metadata._continue is None
    with pytest.raises(ApiException) as invalid:
        core.list_namespaced_config_map(namespace, limit=2, _continue="not-a-token")
    assert invalid.value.status == 400


def test_scale_subresource(apps: client.AppsV1Api, namespace: str) -> None:
    apps.create_namespaced_deployment(namespace, {"metadata": {"name": "scaled"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "s"}},
        "template": {"metadata": {"labels": {"app": "s"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    scale = apps.read_namespaced_deployment_scale("scaled", namespace)
    assert (scale.spec.replicas, scale.status.selector) == (1, "app=s")
    patched = apps.patch_namespaced_deployment_scale("scaled", namespace, {"spec": {"replicas": 4}})
    assert patched.spec.replicas == 4
    assert apps.read_namespaced_deployment("scaled", namespace).spec.replicas == 4
    with pytest.raises(ApiException) as invalid:
        apps.patch_namespaced_deployment_scale("scaled", namespace, {"spec": {"replicas": -1}})
    assert invalid.value.status == 422


def test_dry_run_validates_without_storing(core: client.CoreV1Api, namespace: str) -> None:
    preview = core.create_namespaced_config_map(namespace, {"metadata": {"name": "dry"}, "data": {"a": "1"}},
                                                dry_run="All")
    assert preview.metadata.name == "dry" and preview.metadata.uid
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("dry", namespace)
    assert missing.value.status == 404
    with pytest.raises(ApiException) as invalid:
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "Bad_Name"}}, dry_run="All")
    assert invalid.value.status == 422
    stored = core.create_namespaced_config_map(namespace, {"metadata": {"name": "kept"}, "data": {"a": "1"}})
    patched = core.patch_namespaced_config_map("kept", namespace, {"data": {"a": "2"}}, dry_run="All")
    assert patched.data == {"a": "2"}
    current = core.read_namespaced_config_map("kept", namespace)
    assert (current.data, current.metadata.resource_version) == ({"a": "1"}, stored.metadata.resource_version)
