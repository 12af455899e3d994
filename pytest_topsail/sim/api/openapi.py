"""OpenAPI v3 documents: what ``kubectl apply/create`` need to validate on the server and build patches.

kubectl asks ``/openapi/v3`` for the list of group-versions, then ``/openapi/v3/<api|apis/g>/<v>`` and looks for the
PATCH operation of the object's kind (``x-kubernetes-group-version-kind``) carrying a ``fieldValidation`` query
parameter: found, it leaves validation to the server instead of needing full schemas. The documents carry paths and
operations only, no object schemas (``components.schemas`` is empty), so kubectl builds strategic merge patches of
built-in kinds from its compiled-in types and JSON merge patches for custom resources, as it does against a real
apiserver whose schema lacks a kind. ``/openapi/v2`` carries the same paths (JSON, or the protobuf encoding of the
gnostic ``openapi.v2.Document`` that kubectl 1.27 and 1.28 ask for to decide on server-side validation).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pytest_topsail.sim.api.discovery import GIT_VERSION
from pytest_topsail.sim.machinery.resources import ResourceType
from pytest_topsail.sim.registry.patch import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH

V3_PREFIX = "/openapi/v3"
V2_PATH = "/openapi/v2"
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
GVK_EXTENSION = "x-kubernetes-group-version-kind"
_JSON = "application/json"
_WRITE_PARAMETERS = ("dryRun", "fieldManager", "fieldValidation")


def document(store: Any, path: str, server_address: str = "") -> dict[str, Any] | None:
    """The document served at ``path`` (``/openapi/v3`` or ``/openapi/v3/api/v1``, ...), None when there is none."""
    path = path.rstrip("/")
    types = store.types()
    if path == V3_PREFIX:
        return root_document(types)
    if path.startswith(V3_PREFIX + "/"):
        return group_version_document(types, path[len(V3_PREFIX) + 1:])
    if path == V2_PATH:
        return swagger_document(types)
    return None


def group_version_path(rtype: ResourceType) -> str:
    """``api/v1`` or ``apis/<group>/<version>``: the key of a group-version in ``/openapi/v3``."""
    return f"apis/{rtype.group}/{rtype.version}" if rtype.group else f"api/{rtype.version}"


def root_document(types: list[ResourceType]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for gv_path in sorted({group_version_path(t) for t in types}):
        body = json.dumps(group_version_document(types, gv_path), sort_keys=True).encode()
        digest = hashlib.sha256(body).hexdigest()[:32].upper()
        paths[gv_path] = {"serverRelativeURL": f"{V3_PREFIX}/{gv_path}?hash={digest}"}
    return {"paths": paths}


def group_version_document(types: list[ResourceType], gv_path: str) -> dict[str, Any] | None:
    selected = [t for t in types if group_version_path(t) == gv_path]
    if not selected:
        return None
    paths: dict[str, Any] = {}
    for rtype in selected:
        paths.update(_resource_paths(rtype))
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (pytest-topsail simulator)", "version": GIT_VERSION},
            "paths": paths, "components": {"schemas": {}}}


def _resource_paths(rtype: ResourceType) -> dict[str, Any]:
    base = f"/{group_version_path(rtype)}"
    if rtype.namespaced:
        base += "/namespaces/{namespace}"
    collection = f"{base}/{rtype.plural}"
    item = f"{collection}/{{name}}"
    gvk = {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}
    path_parameters = [_parameter("namespace", "path")] if rtype.namespaced else []
    patch_types = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH] + ([] if rtype.crd_name else [STRATEGIC_MERGE_PATCH])
    paths = {
        collection: {
            "parameters": path_parameters,
            "get": _operation("list", rtype, gvk),
            "post": _operation("post", rtype, gvk, body_types=[_JSON]),
            "delete": _operation("deletecollection", rtype, gvk),
        },
        item: {
            "parameters": path_parameters + [_parameter("name", "path")],
            "get": _operation("get", rtype, gvk),
            "put": _operation("put", rtype, gvk, body_types=[_JSON]),
            "patch": _operation("patch", rtype, gvk, body_types=patch_types),
            "delete": _operation("delete", rtype, gvk),
        },
    }
    if rtype.has_status:
        paths[f"{item}/status"] = {
            "parameters": path_parameters + [_parameter("name", "path")],
            "get": _operation("get", rtype, gvk, "Status"),
            "put": _operation("put", rtype, gvk, "Status", body_types=[_JSON]),
            "patch": _operation("patch", rtype, gvk, "Status", body_types=patch_types),
        }
    return paths


def _operation(action: str, rtype: ResourceType, gvk: dict[str, str], suffix: str = "",
               body_types: list[str] | None = None) -> dict[str, Any]:
    scope = "Namespaced" if rtype.namespaced else ""
    operation: dict[str, Any] = {
        "operationId": f"{action}{scope}{rtype.kind}{suffix}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
        "responses": {"200": {"description": "OK"}},
    }
    if body_types is not None:
        operation["parameters"] = [_parameter(name, "query") for name in _WRITE_PARAMETERS]
        operation["requestBody"] = {"required": True,
                                    "content": {t: {"schema": {"type": "object"}} for t in body_types}}
    return operation


def _parameter(name: str, location: str) -> dict[str, Any]:
    parameter: dict[str, Any] = {"name": name, "in": location, "schema": {"type": "string", "uniqueItems": True}}
    if location == "path":
        parameter["required"] = True
    return parameter


# ----------------------------------------------------------------------------- OpenAPI v2
_V2_METHODS = ("get", "put", "post", "delete", "patch")


def swagger_document(types: list[ResourceType]) -> dict[str, Any]:
    """The OpenAPI v2 (swagger) document: every path with its operations, no definitions."""
    paths: dict[str, Any] = {}
    for rtype in types:
        for path, item in _resource_paths(rtype).items():
            operations = {}
            for method in _V2_METHODS:
                if method in item:
                    operation = item[method]
                    operations[method] = {
                        "operationId": operation["operationId"],
                        GVK_EXTENSION: operation[GVK_EXTENSION],
                        "parameters": [{"name": p["name"], "in": p["in"], "type": "string"}
                                       for p in operation.get("parameters", ())],
                        "responses": {"200": {"description": "OK"}},
                    }
            paths[path] = operations
    return {"swagger": "2.0", "info": {"title": "Kubernetes (pytest-topsail simulator)", "version": GIT_VERSION},
            "paths": paths}


def swagger_protobuf(document: dict[str, Any]) -> bytes:
    """``document`` (from ``swagger_document``) as a protobuf ``openapi.v2.Document`` (google/gnostic field numbers:
    Document.swagger 1, info 2, paths 8; Paths.path 2; PathItem get 2, put 3, post 4, delete 5, patch 8;
    Operation.operation_id 5, parameters 8, vendor_extension 13; ...)."""
    info = _field(1, document["info"]["title"]) + _field(2, document["info"]["version"])
    path_items = b"".join(_field(2, _field(1, path) + _field(2, _path_item(operations)))
                          for path, operations in document["paths"].items())
    return _field(1, document["swagger"]) + _field(2, info) + _field(8, path_items)


def _path_item(operations: dict[str, Any]) -> bytes:
    numbers = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}
    return b"".join(_field(numbers[method], _operation_protobuf(operation)) for method, operation in
                    sorted(operations.items(), key=lambda entry: numbers[entry[0]]))


def _operation_protobuf(operation: dict[str, Any]) -> bytes:
    gvk = operation[GVK_EXTENSION]
    gvk_yaml = f"group: {json.dumps(gvk['group'])}\nkind: {gvk['kind']}\nversion: {gvk['version']}\n"
    parameters = b""
    for parameter in operation["parameters"]:
        # ParametersItem.parameter 1 -> Parameter.non_body_parameter 2 -> NonBodyParameter.query_parameter_sub_schema 3
        # (or path_parameter_sub_schema 4) -> {in 2, name 4, type 6}
        sub_schema = _field(2, parameter["in"]) + _field(4, parameter["name"]) + _field(6, parameter["type"])
        kind = 3 if parameter["in"] == "query" else 4
        parameters += _field(8, _field(1, _field(2, _field(kind, sub_schema))))
    extension = _field(1, GVK_EXTENSION) + _field(2, _field(2, gvk_yaml))  # NamedAny{name, value: Any{yaml 2}}
    return _field(5, operation["operationId"]) + parameters + _field(13, extension)


def _field(number: int, value: str | bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
