"""A CRD created at run time: discovery, CustomObjectsApi and DynamicClient."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

GROUP, VERSION, PLURAL = "sim.example.com", "v1", "gadgets"

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "gadget", "kind": "Gadget", "shortNames": ["gd"]},
        "versions": [{
            "name": VERSION, "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}

CLUSTER_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"racks.{GROUP}"},
    "spec": {
        "group": GROUP, "scope": "Cluster",
        "names": {"plural": "racks", "singular": "rack", "kind": "Rack"},
        "versions": [{"name": VERSION, "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object",
                                                     "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


def _gadget(name: str, size: int = 1) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Gadget", "metadata": {"name": name},
            "spec": {"size": size, "parts": ["a", "b"]}}


@pytest.fixture(scope="module")
def crd_sim(api_sim: Any) -> Any:
    extensions = client.ApiextensionsV1Api(api_sim.api_client())
    created = extensions.create_custom_resource_definition(CRD)
    assert created.metadata.name == f"{PLURAL}.{GROUP}"
    extensions.create_custom_resource_definition(CLUSTER_CRD)
    return api_sim


@pytest.fixture(scope="module")
def custom(crd_sim: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(crd_sim.api_client())


def test_crd_is_established_and_in_discovery(crd_sim: Any) -> None:
    crd = client.ApiextensionsV1Api(crd_sim.api_client()).read_custom_resource_definition(f"{PLURAL}.{GROUP}")
    assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"
    resources = client.ApisApi(crd_sim.api_client()).get_api_versions()
    assert GROUP in {g.name for g in resources.groups}
    listed = crd_sim.raw("GET", f"/apis/{GROUP}/{VERSION}").json()
    names = {r["name"]: r for r in listed["resources"]}
    assert names[PLURAL]["kind"] == "Gadget" and names[PLURAL]["namespaced"] is True
    assert names[PLURAL]["shortNames"] == ["gd"]
    assert f"{PLURAL}/status" in names


def test_custom_objects_crud(custom: client.CustomObjectsApi) -> None:
    created = custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, _gadget("g1"))
    assert created is not None, "custom object create must answer 201 (the client returns None on 200)"
    assert created["metadata"]["uid"] and created["metadata"]["generation"] == 1
    read = custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "g1")
    assert read["spec"] == {"size": 1, "parts": ["a", "b"]}
    patched = custom.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "g1",
                                                    {"spec": {"size": 2, "parts": ["c"]}})
    assert patched["spec"] == {"size": 2, "parts": ["c"]}  # merge patch: lists are replaced
    assert patched["metadata"]["generation"] == 2
    patched["spec"]["size"] = 5
    replaced = custom.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "g1", patched)
    assert replaced["spec"]["size"] == 5
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
    assert listed["kind"] == "GadgetList" and [i["metadata"]["name"] for i in listed["items"]] == ["g1"]
    custom.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "g1")
    with pytest.raises(ApiException) as missing:
        custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "g1")
    assert missing.value.status == 404


def test_custom_object_status_subresource(custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, _gadget("g-status"))
    status = custom.patch_namespaced_custom_object_status(GROUP, VERSION, "default", PLURAL, "g-status",
                                                          {"status": {"phase": "Built"}, "spec": {"size": 99}})
    assert status["status"] == {"phase": "Built"} and status["spec"]["size"] == 1
    main = custom.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "g-status",
                                                 {"status": {"phase": "Ignored"}, "spec": {"size": 3}})
    assert main["status"] == {"phase": "Built"} and main["spec"]["size"] == 3


def test_cluster_scoped_custom_objects(custom: client.CustomObjectsApi) -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Rack", "metadata": {"name": "r1"}, "spec": {"slots": 4}}
    created = custom.create_cluster_custom_object(GROUP, VERSION, "racks", body)
    assert "namespace" not in created["metadata"]
    assert custom.get_cluster_custom_object(GROUP, VERSION, "racks", "r1")["spec"] == {"slots": 4}
    custom.delete_cluster_custom_object(GROUP, VERSION, "racks", "r1")


def test_custom_object_of_the_wrong_kind_is_rejected(custom: client.CustomObjectsApi) -> None:
    body = {**_gadget("wrong"), "kind": "Widget"}
    with pytest.raises(ApiException) as rejected:
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)
    assert rejected.value.status == 400


def test_dynamic_client(crd_sim: Any) -> None:
    dynamic = crd_sim.dynamic_client()
    gadgets = dynamic.resources.get(api_version=f"{GROUP}/{VERSION}", kind="Gadget")
    created = gadgets.create(body=_gadget("dyn", size=4), namespace="default")
    assert created.metadata.name == "dyn" and created.spec.size == 4
    patched = gadgets.patch(name="dyn", namespace="default", body={"spec": {"size": 6}},
                            content_type="application/merge-patch+json")
    assert patched.spec.size == 6
    assert [g.metadata.name for g in gadgets.get(namespace="default").items if g.metadata.name == "dyn"] == ["dyn"]
    with pytest.raises(ApiException) as strategic:  # the DynamicClient's default patch type, as on a real cluster
        gadgets.patch(name="dyn", namespace="default", body={"spec": {"size": 7}})
    assert strategic.value.status == 415
    pods = dynamic.resources.get(api_version="v1", kind="Pod")
    pod = pods.create(namespace="default", body={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dynpod"},
                                                 "spec": {"containers": [{"name": "c", "image": "i"}]}})
    assert pod.status.phase == "Pending"
    gadgets.delete(name="dyn", namespace="default")
    assert [g for g in gadgets.get(namespace="default").items if g.metadata.name == "dyn"] == []


def test_deleting_the_crd_removes_its_objects_and_its_discovery(crd_sim: Any) -> None:
    extensions = client.ApiextensionsV1Api(crd_sim.api_client())
    extensions.create_custom_resource_definition({**CLUSTER_CRD, "metadata": {"name": f"shelves.{GROUP}"},
                                                  "spec": {**CLUSTER_CRD["spec"], "names": {
                                                      "plural": "shelves", "singular": "shelf", "kind": "Shelf"}}})
    custom = client.CustomObjectsApi(crd_sim.api_client())
    custom.create_cluster_custom_object(GROUP, VERSION, "shelves", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Shelf", "metadata": {"name": "s1"}})
    extensions.delete_custom_resource_definition(f"shelves.{GROUP}")
    resources = {r["name"] for r in crd_sim.raw("GET", f"/apis/{GROUP}/{VERSION}").json()["resources"]}
    assert "shelves" not in resources and "racks" in resources
    assert crd_sim.raw("GET", f"/apis/{GROUP}/{VERSION}/shelves").status_code == 404
