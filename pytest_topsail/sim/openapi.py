"""OpenAPI v3 documents: what ``kubectl apply/create`` need to validate on the server and build patches.

kubectl asks ``/openapi/v3`` for the list of group-versions, then ``/openapi/v3/<api|apis/g>/<v>`` and looks for the
PATCH operation of the object's kind (``x-kubernetes-group-version-kind``) carrying a ``fieldValidation`` query
parameter: found, it leaves validation to the server instead of needing full schemas. The documents carry paths and
operations only, no object schemas (``components.schemas`` is empty), so kubectl builds strategic merge patches of
built-in kinds from its compiled-in types and JSON merge patches for custom resources, as it does against a real
apiserver whose schema lacks a kind. ``/openapi/v2`` is not served (kubectl asks for it in protobuf; 404 is accepted).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .discovery import GIT_VERSION
from .patch import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH
from .resources import ResourceType

V3_PREFIX = "/openapi/v3"
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
