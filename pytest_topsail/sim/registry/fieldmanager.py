"""Server-side apply field management: ``metadata.managedFields``, conflicts between field managers, and removal of
the fields an applier dropped from its manifest.

A field is a path of map keys to a leaf; lists are atomic (the simulator's apply merges like a JSON merge patch, so
a list belongs to whoever set it last as a whole). Writes through the API record who set what: a create, update or
non-apply patch gives the fields it changed to its manager (operation ``Update``; the query's ``fieldManager``, else
the client's User-Agent product) and takes them from the others; an apply gives its manager (operation ``Apply``)
exactly the fields of its manifest. An apply that would change a field another manager owns gets ``409 Conflict``
(``force=true`` takes the field); a field the same manager applied before and no longer applies is removed from the
object unless another manager owns it too. Writes by the simulator's own controllers are not tracked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytest_topsail.sim.machinery import apierror
from pytest_topsail.sim.machinery.apierror import ApiError

Path = tuple[str, ...]
Obj = dict[str, Any]

_UNMANAGED_METADATA = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                       "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"}


def manager_from(query_manager: str | None, user_agent: str) -> str:
    """The field manager of a request: ``fieldManager`` when given, else the User-Agent's product name."""
    if query_manager:
        return query_manager
    return (user_agent.split("/", 1)[0] or "unknown").strip() or "unknown"


def flatten(obj: Obj, subresource: str | None = None) -> dict[Path, Any]:
    """Leaf path -> value of the fields a manager can own (``status`` only for the status subresource)."""
    leaves: dict[Path, Any] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if (key == "status") != (subresource == "status"):
            continue
        if key == "metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in _UNMANAGED_METADATA}
            if not value:
                continue
        _walk(value, (key,), leaves)
    return leaves


def _walk(value: Any, path: Path, leaves: dict[Path, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _walk(item, (*path, key), leaves)
    else:
        leaves[path] = value


def fields_v1(paths: set[Path]) -> Obj:
    tree: Obj = {}
    for path in sorted(paths):
        node = tree
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return tree


def paths_of(fields: Obj, prefix: Path = ()) -> set[Path]:
    result: set[Path] = set()
    for key, child in (fields or {}).items():
        if not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        result |= paths_of(child, path) if child else {path}
    return result


def _entry(manager: str, operation: str, api_version: str, now: str, paths: set[Path],
           subresource: str | None) -> Obj:
    entry: Obj = {"manager": manager, "operation": operation, "apiVersion": api_version, "time": now,
                  "fieldsType": "FieldsV1", "fieldsV1": fields_v1(paths)}
    if subresource:
        entry["subresource"] = subresource
    return entry


def entry_for(manager: str, operation: str, api_version: str, now: str, body: Obj,
              known: dict[str, Obj] | None = None) -> Obj:
    """The one managedFields entry of a new object: its manager owns every field of the body it sent (built
    straight from the body: this runs on every create through the API). ``known``: the ``field_tree`` of some
    top-level fields, computed before for a body with the same content there."""
    keys: list[str] = []
    subtrees: list[Obj] = []
    for key, value in body.items():
        if key in ("apiVersion", "kind", "status"):
            continue
        subtree = known.get(key) if known is not None else None
        if subtree is None:
            if key == "metadata" and isinstance(value, dict):
                managed = [(k, v) for k, v in value.items() if k not in _UNMANAGED_METADATA]
                if not managed:
                    continue
                subtree = _map_tree(managed)
            else:
                subtree = _tree(value)
        keys.append(_key_text(key))
        subtrees.append(subtree)
    signature = (manager, operation, api_version, now, *keys, *map(id, subtrees))
    shared = _SHARED_ENTRIES.get(signature)
    if shared is None:  # objects created alike within one second share their entry too
        if len(_SHARED_ENTRIES) >= _SHARED_LIMIT:
            _SHARED_ENTRIES.clear()
        tree = {f"f:{key}": subtree for key, subtree in zip(keys, subtrees, strict=True)}
        shared = _SHARED_ENTRIES[signature] = {"manager": manager, "operation": operation, "apiVersion": api_version,
                                               "time": now, "fieldsType": "FieldsV1", "fieldsV1": tree}
    return shared


_SHARED: dict[tuple[Any, ...], Obj] = {}  # interned subtrees: objects of one shape share them
_SHARED_LIMIT = 50_000
_SHARED_ENTRIES: dict[tuple[Any, ...], Obj] = {}
_LEAF: Obj = {}  # the tree of a scalar, a list or an empty map


def field_tree(value: Any) -> Obj:
    """The FieldsV1 tree of one top-level field's value (as ``entry_for`` builds it)."""
    return _tree(value)


def _tree(value: Any) -> Obj:
    """The FieldsV1 tree of a value, interned: the store never mutates what it holds, so the thousands of pods of
    one template share one tree instead of a copy each."""
    if not isinstance(value, dict) or not value:
        return _LEAF
    return _map_tree(value.items())


def _key_text(key: Any) -> str:
    """A key as its field path names it: a YAML body's 1 and True become "1" and "True" ("f:1", "f:True")."""
    return key if key.__class__ is str else f"{key}"


def _map_tree(items: Iterable[tuple[str, Any]]) -> Obj:
    """The tree of a non-empty map's (key, value) pairs. Looked up by the keys as they are (not "f:" + key) and the
    children's ids (keys are strings, ids integers, both halves of one length: signatures cannot be confused), so
    a tree seen before costs no new strings."""
    keys: list[str] = []
    children: list[Obj] = []
    for key, item in items:
        keys.append(_key_text(key))
        children.append(_map_tree(item.items()) if isinstance(item, dict) and item else _LEAF)
    signature = (*keys, *map(id, children))
    shared = _SHARED.get(signature)
    if shared is None:
        if len(_SHARED) >= _SHARED_LIMIT:
            _SHARED.clear()
        shared = _SHARED[signature] = {f"f:{key}": child for key, child in zip(keys, children, strict=True)}
    return shared


def _same_owner(entry: Obj, manager: str, operation: str, subresource: str | None) -> bool:
    return (entry.get("manager"), entry.get("operation"), entry.get("subresource")) == (
        manager, operation, subresource)


def _rebuild(managed: list[Obj], taken: set[Path], mine: Obj) -> list[Obj]:
    """The managed fields with ``taken`` removed from every other entry (empty ones dropped) and ``mine`` set."""
    result = []
    for entry in managed:
        if _same_owner(entry, mine["manager"], mine["operation"], mine.get("subresource")):
            continue
        paths = paths_of(entry.get("fieldsV1") or {}) - taken
        if paths:
            result.append({**entry, "fieldsV1": fields_v1(paths)})
    if mine["fieldsV1"]:
        result.append(mine)
    return result


def record_update(old: Obj | None, new: Obj, manager: str, api_version: str, now: str,
                  subresource: str | None = None) -> list[Obj]:
    """The managedFields after a create/update/patch by ``manager``: it owns what it changed (added to what it
    owned), the fields it removed are nobody's."""
    managed = list(((old or {}).get("metadata") or {}).get("managedFields") or [])
    before = flatten(old, subresource) if old else {}
    after = flatten(new, subresource)
    changed = {path for path, value in after.items() if path not in before or before[path] != value}
    removed = set(before) - set(after)
    if not changed and not removed:
        return managed
    owned: set[Path] = set()
    for entry in managed:
        if _same_owner(entry, manager, "Update", subresource):
            owned = paths_of(entry.get("fieldsV1") or {})
    mine = _entry(manager, "Update", api_version, now, ((owned - removed) | changed) & set(after), subresource)
    return _rebuild(managed, changed | removed, mine)


def apply(live: Obj, config: Obj, merged: Obj, manager: str, api_version: str, now: str, force: bool,
          subresource: str | None = None) -> Obj:
    """``merged`` (the live object with ``config`` merged in) with the fields ``manager`` stopped applying
    removed and its managedFields set; 409 Conflict for fields owned by others with other values."""
    managed = list((live.get("metadata") or {}).get("managedFields") or [])
    applied = flatten(config, subresource)
    current = flatten(live, subresource)
    conflicts: dict[str, list[Path]] = {}
    previously: set[Path] = set()
    others: set[Path] = set()
    for entry in managed:
        paths = paths_of(entry.get("fieldsV1") or {})
        if _same_owner(entry, manager, "Apply", subresource):
            previously = paths
            continue
        if entry.get("subresource") != subresource:
            continue
        others |= paths
        for path in paths & set(applied):
            if path in current and current[path] != applied[path]:
                conflicts.setdefault(f'"{entry.get("manager")}" using {entry.get("apiVersion")}', []).append(path)
    if conflicts and not force:
        raise _conflict(conflicts)
    taken = {path for paths in conflicts.values() for path in paths}
    result = merged
    for path in sorted(previously - set(applied) - (others - taken)):
        result = _remove(result, path)
    mine = _entry(manager, "Apply", api_version, now, set(applied), subresource)
    metadata = {**result["metadata"], "managedFields": _rebuild(managed, taken, mine)}
    return {**result, "metadata": metadata}


def _remove(obj: Obj, path: Path) -> Obj:
    """A copy of ``obj`` without the field at ``path`` (and without maps emptied by that, below the top level)."""
    head, rest = path[0], path[1:]
    if head not in obj:
        return obj
    if not rest:
        return {k: v for k, v in obj.items() if k != head}
    child = obj[head]
    if not isinstance(child, dict):
        return obj
    pruned = _remove(child, rest)
    if not pruned and len(path) > 2:
        return {k: v for k, v in obj.items() if k != head}
    return {**obj, head: pruned}


def _conflict(conflicts: dict[str, list[Path]]) -> ApiError:
    count = sum(len(paths) for paths in conflicts.values())
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {owner}", "field": _dotted(path)}
              for owner, paths in conflicts.items() for path in sorted(paths)]
    if count == 1:
        ((owner, paths),) = conflicts.items()
        text = f"Apply failed with 1 conflict: conflict with {owner}: {_dotted(paths[0])}"
    else:
        parts = []
        for owner, paths in conflicts.items():
            listed = "\n".join(f"- {_dotted(path)}" for path in sorted(paths))
            parts.append(f"conflicts with {owner}:\n{listed}")
        text = f"Apply failed with {count} conflicts: " + "\n".join(parts)
    return ApiError(409, "Conflict", text, {"causes": causes})


def _dotted(path: Path) -> str:
    return "." + ".".join(path)


def require_manager(manager: str | None) -> str:
    if not manager:
        raise apierror.bad_request("PATCH /apply requires a fieldManager query parameter (fieldManager is required "
                                   "for apply requests)")
    return manager
