"""Malformed requests get the apiserver's ``kind: Status`` errors (never a 500); the audit log records mutations."""

from __future__ import annotations

import json
from typing import Any

import pytest

CM = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"


def _pod(name: str, **container: Any) -> str:
    return json.dumps({"metadata": {"name": name}, "spec": {"containers": [
        {"name": "c", "image": "i", **container}]}})


@pytest.fixture(scope="module", autouse=True)
def existing(api_sim: Any) -> None:
    assert api_sim.raw("POST", CM, json.dumps({"metadata": {"name": "existing"}, "data": {"a": "1"}})).ok


@pytest.mark.parametrize(("method", "path", "body", "content_type", "code", "reason", "message"), [
    ("POST", CM, "{not json", "application/json", 400, "BadRequest", "could not be decoded"),
    ("POST", CM, "[1, 2]", "application/json", 400, "BadRequest", "not a JSON object"),
    ("POST", CM, "", "application/json", 400, "BadRequest", "empty"),
    ("POST", CM, "x", "application/vnd.kubernetes.protobuf", 400, "BadRequest", "magic number"),
    ("POST", CM, "k8s\x00\x0a\x0e\x0a\x02v1\x12\x08Gadget", "application/vnd.kubernetes.protobuf", 415,
     "UnsupportedMediaType", "send it as application/json"),
    ("POST", CM, '{"metadata": {"name": "x"}}', "application/cbor", 415, "UnsupportedMediaType", "cbor"),
    ("POST", CM, '{"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "x"}}', "application/json",
     400, "BadRequest", "Secret is not ConfigMap"),
    ("POST", CM, '{"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}}', "application/json",
     400, "BadRequest", "does not match the expected API version"),
    ("POST", CM, '{"metadata": {"name": "Bad_Name"}}', "application/json", 422, "Invalid", "RFC 1123"),
    ("POST", CM, '{"metadata": {}}', "application/json", 422, "Invalid", "name or generateName is required"),
    ("POST", CM, '{"metadata": {"name": "x", "labels": {"v": 1.5}}}', "application/json", 400, "BadRequest",
     "cannot unmarshal number"),
    ("POST", CM, '{"metadata": {"name": "x"}, "data": {"a": 1}}', "application/json", 400, "BadRequest",
     "ConfigMap.data"),
    ("POST", PODS, '{"metadata": {"name": "p"}, "spec": "x"}', "application/json", 400, "BadRequest", "Pod.spec"),
    ("POST", PODS, '{"metadata": {"name": "p"}, "spec": {}}', "application/json", 422, "Invalid", "spec.containers"),
    ("POST", PODS, _pod("p", resources="x"), "application/json", 400, "BadRequest", "resources"),
    ("POST", PODS, _pod("p", resources={"requests": {"cpu": "lots"}}), "application/json", 400, "BadRequest",
     "quantities must match"),
    ("POST", PODS, _pod("p", resources={"requests": {"memory": "1e999999999"}}), "application/json", 400,
     "BadRequest", "exponent beyond 64"),  # exact arithmetic on it would never end
    ("POST", PODS, _pod("p", command="sleep 1"), "application/json", 400, "BadRequest", "command"),
    ("POST", "/apis/batch/v1/namespaces/default/jobs", json.dumps({"metadata": {"name": "j"}, "spec": {
        "parallelism": "x", "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
     "application/json", 400, "BadRequest", "Job.spec.parallelism"),
    ("POST", "/api/v1/nodes/x", "{}", "application/json", 405, "MethodNotAllowed", "not allow"),
    ("GET", "/api/v1/namespaces/default/gizmos", None, "application/json", 404, "NotFound", "could not find"),
    ("GET", "/apis/nope.io/v1/things", None, "application/json", 404, "NotFound", "could not find"),
    ("GET", f"{CM}/a/b/c", None, "application/json", 404, "NotFound", "could not find"),
    ("GET", f"{CM}/missing", None, "application/json", 404, "NotFound", 'configmaps "missing" not found'),
    ("GET", f"{CM}?labelSelector=a%20in%20(", None, "application/json", 400, "BadRequest", "label selector"),
    ("GET", f"{CM}?fieldSelector=spec.foo%3Dx", None, "application/json", 400, "BadRequest",
     "field label not supported"),
    ("GET", f"{CM}?watch=true&resourceVersion=abc", None, "application/json", 400, "BadRequest", "resourceVersion"),
    ("PATCH", f"{CM}/existing", '[{"op": "add"}]', "application/merge-patch+json", 400, "BadRequest", "unmarshal"),
    ("PATCH", f"{CM}/existing", '{"data": {"b": "2"}}', "application/json-patch+json", 400, "BadRequest",
     "unmarshal"),
    ("PATCH", f"{CM}/existing", '[{"op": "bogus", "path": "/x"}]', "application/json-patch+json", 400,
     "BadRequest", "bogus"),
    ("PATCH", f"{CM}/existing", '{"data": {"b": "2"}}', "text/plain", 415, "UnsupportedMediaType", "text/plain"),
    ("PATCH", f"{CM}/existing", '{"metadata": {"name": "other"}}', "application/merge-patch+json", 422,
     "Invalid", "immutable"),
    ("PATCH", f"{CM}/missing", '{"data": {}}', "application/merge-patch+json", 404, "NotFound", "not found"),
    ("PUT", f"{CM}/existing", '{"metadata": {"name": "different"}}', "application/json", 400, "BadRequest",
     "does not match the name"),
    ("PUT", f"{CM}/existing", '{"metadata": {"name": "existing", "resourceVersion": "1"}}', "application/json",
     409, "Conflict", "has been modified"),
    ("DELETE", f"{CM}/existing?propagationPolicy=Sideways", None, "application/json", 400, "BadRequest",
     "propagationPolicy"),
    ("OPTIONS", "/api/v1/nodes", None, "application/json", 405, "MethodNotAllowed", "OPTIONS"),
    ("GET", "/nonsense", None, "application/json", 404, "NotFound", "could not find"),
    ("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", '{"metadata": {"name": "x.y"}, "spec": {}}',
     "application/json", 422, "Invalid", "spec.group"),
])
def test_bad_request_gets_a_status_error(api_sim: Any, method: str, path: str, body: str | None,
                                         content_type: str, code: int, reason: str, message: str) -> None:
    response = api_sim.raw(method, path, body, content_type)
    assert response.status_code == code
    status = response.json()
    assert (status["kind"], status["status"], status["reason"], status["code"]) == ("Status", "Failure", reason, code)
    assert message in status["message"]
    assert "Traceback" not in response.text


def test_status_errors_name_the_object(api_sim: Any) -> None:
    status = api_sim.raw("GET", f"{CM}/missing").json()
    assert status["details"] == {"name": "missing", "kind": "configmaps"}


def test_unauthorized_without_or_with_a_wrong_token(api_sim: Any) -> None:
    assert api_sim.raw("GET", "/api/v1/namespaces", authorized=False).status_code == 401
    response = api_sim.raw("GET", "/version", authorized=False)
    assert response.status_code == 401 and response.json()["reason"] == "Unauthorized"


def test_a_client_expecting_100_continue_gets_it(api_sim: Any) -> None:
    body = json.dumps({"metadata": {"name": "continued"}})
    assert api_sim.raw("POST", CM, body, headers={"Expect": "100-continue"}).status_code == 201
    assert api_sim.raw("POST", CM, body, headers={"Expect": "something"}).status_code == 417


def test_a_body_over_a_megabyte_is_read(api_sim: Any) -> None:
    body = json.dumps({"metadata": {"name": "big"}, "data": {"a": "x" * (1 << 20)}})
    assert api_sim.raw("POST", CM, body).status_code == 201  # aiohttp's default limit is 1 MB


def test_audit_log_has_one_json_line_per_mutating_request(api_sim: Any) -> None:
    before = len(api_sim.audit_records())
    assert api_sim.raw("POST", CM, '{"metadata": {"name": "audited"}}').status_code == 201
    assert api_sim.raw("GET", f"{CM}/audited").status_code == 200
    assert api_sim.raw("PATCH", f"{CM}/audited", '{"data": {"x": "y"}}',
                       "application/merge-patch+json").status_code == 200
    assert api_sim.raw("DELETE", f"{CM}/audited").status_code == 200
    assert api_sim.raw("DELETE", f"{CM}/audited").status_code == 404
    records = api_sim.audit_records()[before:]
    assert [(r["verb"], r["resource"], r["namespace"], r["code"]) for r in records] == [
        ("create", "configmaps", "default", 201), ("patch", "configmaps", "default", 200),
        ("delete", "configmaps", "default", 200), ("delete", "configmaps", "default", 404)]
    assert records[1]["name"] == "audited"
    assert records[0]["userAgent"].startswith("python-requests")
    assert records[0]["time"].endswith("Z")
    token = api_sim.token()
    assert token not in api_sim.audit_log_path.read_text()
