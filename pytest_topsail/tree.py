"""Nested mappings addressed by dotted keys (``tests.scale.jobs``): the one set of tree helpers of the project.

Foundation module: imports nothing of pytest-topsail, so every layer (engine, Kubernetes layer, simulator, domain
packages) may use it. Keys are split on ``.``; checking that a user's key is well formed is the caller's business
(``config.split_key`` does it for configuration keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MISSING = object()


def copy_tree(tree: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the mappings of `tree` (values that are not mappings are shared, like lists)."""
    return {key: copy_tree(value) if isinstance(value, Mapping) else value for key, value in tree.items()}


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` merged onto a copy of ``base``: mappings merge key by key, anything else replaces."""
    merged = copy_tree(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy_tree(value) if isinstance(value, Mapping) else value
    return merged


def get_path(tree: Any, key: str, default: Any = None) -> Any:
    """The value at dotted `key`, or `default` when a part is missing or not under a mapping."""
    node = tree
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def has_path(tree: Any, key: str) -> bool:
    return get_path(tree, key, _MISSING) is not _MISSING


def set_path(tree: dict[str, Any], key: str, value: Any, *, create: bool = True) -> None:
    """Set dotted `key` to `value`; missing (or non-mapping) parents are replaced by mappings (``create``), else a
    missing parent is a KeyError."""
    *parents, last = key.split(".")
    for part in parents:
        if not create:
            tree = tree[part]
            continue
        child = tree.get(part)
        if not isinstance(child, dict):
            child = tree[part] = {}
        tree = child
    tree[last] = value


def leaves(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted key -> value of every leaf (a value that is not a non-empty mapping), in document order."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(leaves(value, path + "."))
        else:
            flat[path] = value
    return flat


def paths(tree: Any, prefix: str = "") -> list[str]:
    """Every dotted key of `tree` (inner nodes and leaves), in document order."""
    found: list[str] = []
    if isinstance(tree, Mapping):
        for name, value in tree.items():
            path = f"{prefix}{name}"
            found.append(path)
            found.extend(paths(value, path + "."))
    return found
