"""Finalizers, garbage collection by ownerReferences and namespace deletion, through the official client."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException


@pytest.fixture(scope="module")
def core(api_sim: Any) -> client.CoreV1Api:
    return client.CoreV1Api(api_sim.api_client())


@pytest.fixture
def namespace(core: client.CoreV1Api) -> str:
    name = f"l-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def _exists(read: Any, *args: Any) -> bool:
    try:
        read(*args)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def _owned(name: str, owner: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid}]}}


def test_finalizer_holds_the_object_until_removed(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
    core.delete_namespaced_config_map("held", namespace)
    held = core.read_namespaced_config_map("held", namespace)
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.finalizers == ["example.com/hold"]
    core.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}},
                                     _content_type="application/merge-patch+json")
    assert not _exists(core.read_namespaced_config_map, "held", namespace)


def test_background_deletion_collects_dependents(core: client.CoreV1Api, namespace: str) -> None:
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(namespace, _owned("child-1", owner))
    core.create_namespaced_secret(namespace, _owned("child-2", owner))
    core.delete_namespaced_config_map("owner", namespace)
    assert not _exists(core.read_namespaced_config_map, "child-1", namespace)
    assert not _exists(core.read_namespaced_secret, "child-2", namespace)


def test_orphan_deletion_keeps_dependents_without_the_reference(core: client.CoreV1Api, namespace: str) -> None:
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(namespace, _owned("orphan", owner))
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Orphan")
    orphan = core.read_namespaced_config_map("orphan", namespace)
    assert not orphan.metadata.owner_references


def test_foreground_deletion_waits_for_blocking_dependents(core: client.CoreV1Api, namespace: str) -> None:
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(namespace, {"metadata": {
        **_owned("slow", owner)["metadata"], "finalizers": ["example.com/slow"]}})
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Foreground")
    waiting = core.read_namespaced_config_map("owner", namespace)
    assert "foregroundDeletion" in waiting.metadata.finalizers
    assert core.read_namespaced_config_map("slow", namespace).metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("slow", namespace, {"metadata": {"finalizers": None}},
                                     _content_type="application/merge-patch+json")
    assert not _exists(core.read_namespaced_config_map, "slow", namespace)
    assert not _exists(core.read_namespaced_config_map, "owner", namespace)


def test_a_dependent_with_another_live_owner_survives(core: client.CoreV1Api, namespace: str) -> None:
    first = core.create_namespaced_config_map(namespace, {"metadata": {"name": "first"}})
    second = core.create_namespaced_config_map(namespace, {"metadata": {"name": "second"}})
    refs = _owned("shared", first)["metadata"]["ownerReferences"] + _owned("shared", second)["metadata"][
        "ownerReferences"]
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "shared", "ownerReferences": refs}})
    core.delete_namespaced_config_map("first", namespace)
    shared = core.read_namespaced_config_map("shared", namespace)
    assert [r.name for r in shared.metadata.owner_references] == ["second"]


def test_namespace_deletion_removes_its_content(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "cm"}})
    core.create_namespaced_pod(namespace, {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "i"}]}})
    core.delete_namespace(namespace)
    assert not _exists(core.read_namespace, namespace)
    assert core.list_namespaced_config_map(namespace).items == []
    assert core.list_namespaced_pod(namespace).items == []


def test_terminating_namespace_refuses_new_content(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "blocker", "finalizers": ["example.com/x"]}})
    core.delete_namespace(namespace)
    terminating = core.read_namespace(namespace)
    assert terminating.status.phase == "Terminating"
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "late"}})
    assert refused.value.status == 403
    assert "being terminated" in json.loads(refused.value.body)["message"]
    core.patch_namespaced_config_map("blocker", namespace, {"metadata": {"finalizers": None}},
                                     _content_type="application/merge-patch+json")
    assert not _exists(core.read_namespace, namespace)


def test_create_in_a_missing_namespace_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        core.create_namespaced_config_map("no-such-namespace", {"metadata": {"name": "x"}})
    assert missing.value.status == 404
    assert json.loads(missing.value.body)["message"] == 'namespaces "no-such-namespace" not found'
