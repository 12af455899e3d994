"""Validation of built-in kinds as kube-apiserver words it (422 Invalid with causes) and Status bodies byte for byte."""

from __future__ import annotations

import json
from typing import Any

import pytest

PODS = "/api/v1/namespaces/default/pods"
JOBS = "/apis/batch/v1/namespaces/default/jobs"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
GPU = "nvidia.com/gpu"


def _pod(name: str, spec: dict[str, Any] | None = None, labels: dict[str, Any] | None = None,
         **container: Any) -> str:
    metadata: dict[str, Any] = {"name": name}
    if labels is not None:
        metadata["labels"] = labels
    return json.dumps({"metadata": metadata, "spec": {"containers": [{"name": "c", "image": "i", **container}],
                                                      **(spec or {})}})


def _template(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


@pytest.mark.parametrize(("path", "body", "field", "message"), [
    (PODS, _pod("p1", spec={"restartPolicy": "Sometimes"}), "spec.restartPolicy",
     'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'),
    (PODS, _pod("p2", imagePullPolicy="Sometimes"), "spec.containers[0].imagePullPolicy",
     'Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"'),
    (PODS, _pod("p3", ports=[{"containerPort": 80, "protocol": "tcp"}]), "spec.containers[0].ports[0].protocol",
     'Unsupported value: "tcp": supported values: "SCTP", "TCP", "UDP"'),
    (PODS, _pod("p4", ports=[{"containerPort": 70000}]), "spec.containers[0].ports[0].containerPort",
     "Invalid value: 70000: must be between 1 and 65535, inclusive"),
    (PODS, _pod("p5", resources={"requests": {GPU: "1"}, "limits": {GPU: "2"}}),
     "spec.containers[0].resources.requests",
     'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2'),
    (PODS, _pod("p6", resources={"requests": {GPU: "1"}}), "spec.containers[0].resources.limits",
     "Required value: Limit must be set for non overcommitable resources"),
    (PODS, _pod("p7", resources={"limits": {GPU: "0.5"}}), "spec.containers[0].resources.limits[nvidia.com/gpu]",
     'Invalid value: "0.5": must be an integer'),
    (PODS, _pod("p8", resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
     "spec.containers[0].resources.requests", 'Invalid value: "2": must be less than or equal to cpu limit of 1'),
    (PODS, _pod("p9", labels={"app": "has space"}), "metadata.labels",
     'Invalid value: "has space": a valid label must be an empty string or consist of alphanumeric characters, '
     "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
     "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
    (PODS, _pod("p10", labels={"bad key!": "x"}), "metadata.labels",
     "Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must "
     "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
     "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
    (PODS, _pod("p11", labels={"a": "x" * 64}), "metadata.labels",
     f'Invalid value: "{"x" * 64}": must be no more than 63 characters'),
    (PODS, json.dumps({"metadata": {"name": "p12"}, "spec": {"containers": [
        {"name": "c", "image": "i"}, {"name": "c", "image": "i"}]}}), "spec.containers[1].name",
     'Duplicate value: "c"'),
    (PODS, json.dumps({"metadata": {"name": "p13"}, "spec": {"containers": [{"name": "C_1", "image": "i"}]}}),
     "spec.containers[0].name", 'Invalid value: "C_1": a lowercase RFC 1123 label must consist of'),
    (PODS, json.dumps({"metadata": {"name": "Bad_Name"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
     "metadata.name", "Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case "
                      "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
                      "(e.g. 'example.com', regex used for validation is "
                      "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    (JOBS, json.dumps({"metadata": {"name": "j"}, "spec": {"template": _template()}}),
     "spec.template.spec.restartPolicy", 'Unsupported value: "Always": supported values: "OnFailure", "Never"'),
    (DEPLOYMENTS, json.dumps({"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "x"}},
                                                                  "template": _template(restartPolicy="Never")}}),
     "spec.template.spec.restartPolicy", 'Unsupported value: "Never": supported values: "Always"'),
])
def test_invalid_built_in_objects_get_the_apiservers_422(api_sim: Any, path: str, body: str, field: str,
                                                         message: str) -> None:
    response = api_sim.raw("POST", path, body)
    assert response.status_code == 422, response.text
    status = response.json()
    assert status["reason"] == "Invalid"
    causes = [(cause["field"], cause["message"]) for cause in status["details"]["causes"]]
    assert any(f == field and m.startswith(message) for f, m in causes), causes
    assert f"{field}: {message}" in status["message"]


def test_a_gpu_limit_alone_sets_the_request(api_sim: Any) -> None:
    response = api_sim.raw("POST", PODS, _pod("gpu-limit", resources={"limits": {GPU: 2, "cpu": "1"}}))
    assert response.status_code == 201, response.text
    resources = response.json()["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {GPU: 2, "cpu": "1"}


def test_status_bodies_are_the_apiservers_bytes(api_sim: Any) -> None:
    body = json.dumps({"metadata": {"name": "dup"}, "data": {}})
    assert api_sim.raw("POST", "/api/v1/namespaces/default/configmaps", body).status_code == 201
    response = api_sim.raw("POST", "/api/v1/namespaces/default/configmaps", body)
    assert response.content == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \\"dup\\" '
        b'already exists","reason":"AlreadyExists","details":{"name":"dup","kind":"configmaps"},"code":409}\n')
    invalid = api_sim.raw("POST", PODS, _pod("bad", spec={"restartPolicy": "Sometimes"}))
    assert invalid.content.startswith(
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Pod \\"bad\\" is invalid: '
        b'spec.restartPolicy: Unsupported value: \\"Sometimes\\": supported values: \\"Always\\", \\"OnFailure\\", '
        b'\\"Never\\"","reason":"Invalid","details":{"name":"bad","kind":"Pod","causes":[{"reason":'
        b'"FieldValueNotSupported","message":"Unsupported value: \\"Sometimes\\": supported values: \\"Always\\", '
        b'\\"OnFailure\\", \\"Never\\"","field":"spec.restartPolicy"}]},"code":422}')
