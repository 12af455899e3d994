"""The three patch formats of the apiserver: JSON merge (RFC 7386), JSON patch (RFC 6902) and strategic merge.

Patches never mutate their input: they return new containers along the changed paths and share the rest.
Strategic merge uses the merge keys of the core types by field name (containers[name], env[name],
ports[containerPort or port], volumes[name], volumeMounts[mountPath], conditions[type], ownerReferences[uid], ...),
merges ``finalizers`` as a set, replaces every other list, and honours the directives ``$patch: replace|delete``,
``$deleteFromPrimitiveList/<field>``, ``$setElementOrder/<field>`` and ``$retainKeys``.
"""

from __future__ import annotations

import copy
from typing import Any

from pytest_topsail.sim.machinery.apierror import ApiError, bad_request, unsupported_media_type

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (MERGE_PATCH, JSON_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)

_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "addresses": "type",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
}
_SET_LISTS = {"finalizers"}


def apply_patch(target: dict[str, Any], patch: Any, patch_type: str) -> dict[str, Any]:
    """Apply ``patch`` of the given content type to ``target``; returns a new object."""
    if patch_type in (MERGE_PATCH, APPLY_PATCH):
        if not isinstance(patch, dict):
            raise bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
        return merge_patch(target, patch)
    if patch_type == STRATEGIC_MERGE_PATCH:
        if not isinstance(patch, dict):
            raise bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
        return strategic_merge_patch(target, patch)
    if patch_type == JSON_PATCH:
        if not isinstance(patch, list):
            raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        return json_patch(target, patch)
    raise unsupported_media_type(patch_type)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            result[key] = merge_patch(result.get(key), value)
        else:
            result[key] = value
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f'invalid JSON pointer "{path}"')
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, parts: list[str], path: str) -> Any:
    for part in parts:
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            raise ApiError(422, "Invalid", f'the server rejected our request due to an error in our request: '
                                           f'jsonpatch path "{path}" does not exist')
    return doc


def _list_index(container: list, part: str, path: str, for_add: bool) -> int:
    if part == "-" and for_add:
        return len(container)
    limit = len(container) if for_add else len(container) - 1
    if not part.isdigit() or int(part) > limit:
        raise ApiError(422, "Invalid", f'jsonpatch: index out of range in path "{path}"')
    return int(part)


def json_patch(target: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 operations add, remove, replace, move, copy, test."""
    doc = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise bad_request(f"invalid JSON patch operation: {operation!r}")
        op, path = operation["op"], operation["path"]
        parts = _pointer(path)
        if op == "test":
            if _resolve(doc, parts, path) != operation.get("value"):
                raise ApiError(422, "Invalid", f'jsonpatch test operation does not apply: path "{path}"')
            continue
        if op in ("move", "copy"):
            source_path = operation.get("from", "")
            source_parts = _pointer(source_path)
            value = copy.deepcopy(_resolve(doc, source_parts, source_path))
            if op == "move":
                doc = _remove(doc, source_parts, source_path)
            doc = _add(doc, parts, path, value)
        elif op == "add":
            doc = _add(doc, parts, path, copy.deepcopy(operation.get("value")))
        elif op == "remove":
            doc = _remove(doc, parts, path)
        elif op == "replace":
            _resolve(doc, parts, path)
            doc = _add(doc, parts, path, copy.deepcopy(operation.get("value")), replace=True)
        else:
            raise bad_request(f'unexpected JSON patch operation "{op}"')
    return doc


def _add(doc: Any, parts: list[str], path: str, value: Any, replace: bool = False) -> Any:
    if not parts:
        return value
    parent = _resolve(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        index = _list_index(parent, last, path, for_add=not replace)
        if replace:
            parent[index] = value
        else:
            parent.insert(index, value)
    else:
        raise ApiError(422, "Invalid", f'jsonpatch path "{path}" does not exist')
    return doc


def _remove(doc: Any, parts: list[str], path: str) -> Any:
    parent = _resolve(doc, parts[:-1], path)
    last = parts[-1] if parts else ""
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list):
        del parent[_list_index(parent, last, path, for_add=False)]
    else:
        raise ApiError(422, "Invalid", f'jsonpatch remove operation does not apply: path "{path}" does not exist')
    return doc


def strategic_merge_patch(target: Any, patch: dict[str, Any]) -> Any:
    """Strategic merge of ``patch`` into ``target`` (see the module docstring for the supported subset)."""
    if patch.get("$patch") == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            remove = set(map(str, value or []))
            result[field] = [item for item in result.get(field) or [] if str(item) not in remove]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = value
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        sample = next((i for i in items if isinstance(i, dict)), {})
        return "containerPort" if "containerPort" in sample else "port"
    return _MERGE_KEYS.get(field)


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    current = current if isinstance(current, list) else []
    if field in _SET_LISTS:
        merged = list(current)
        merged.extend(item for item in patch if item not in current)
        return merged
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [i for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    key = _merge_key(field, patch + current)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return list(patch)
    merged = list(current)
    positions = {item.get(key): index for index, item in enumerate(merged) if isinstance(item, dict)}
    deleted: set[Any] = set()
    for item in patch:
        identity = item.get(key)
        if item.get("$patch") == "delete":
            deleted.add(identity)
        elif identity in positions:
            merged[positions[identity]] = strategic_merge_patch(merged[positions[identity]], item)
        else:
            positions[identity] = len(merged)
            merged.append(strategic_merge_patch({}, item))
    return [i for i in merged if not (isinstance(i, dict) and i.get(key) in deleted)]
