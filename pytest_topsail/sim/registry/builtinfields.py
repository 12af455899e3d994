"""The fields of built-in kinds, for finding unknown ones as kube-apiserver's decoder does (fieldValidation): read
from the official client's models (``kubernetes.client.models``: each model's ``attribute_map`` gives the JSON field
names, ``openapi_types`` their types), which are generated from the Kubernetes OpenAPI. Walked lazily, one model at
a time, and cached."""

from __future__ import annotations

import functools
import re
from typing import Any

from pytest_topsail.sim.machinery.resources import ResourceType

_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")
# Kinds whose model is not named after version + kind.
_MODEL_NAMES = {("", "Event"): "CoreV1Event", ("events.k8s.io", "Event"): "EventsV1Event"}


@functools.cache
def _fields(model_name: str) -> dict[str, str] | None:
    """JSON field name -> type of a client model (None when the client has no such model)."""
    from kubernetes.client import models

    model = getattr(models, model_name, None)
    if model is None:
        return None
    return {json_name: model.openapi_types[attribute] for attribute, json_name in model.attribute_map.items()}


def model_name(rtype: ResourceType) -> str:
    return _MODEL_NAMES.get((rtype.group, rtype.kind)) or rtype.version.capitalize() + rtype.kind


def prune_unknown(rtype: ResourceType, obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(the object without the fields its kind does not have, their paths); unchanged when the kind's model is
    unknown."""
    fields = _fields(model_name(rtype))
    if fields is None:
        return obj, []
    if not _has_unknown(fields, obj):  # the common case, looked at without building anything
        return obj, []
    unknown: list[str] = []
    return _prune_model(fields, obj, "", unknown), unknown


def _has_unknown(fields: dict[str, str], obj: dict[str, Any]) -> bool:
    for key, value in obj.items():
        kind = fields.get(key)
        if kind is None:
            return True
        if (value.__class__ is dict or value.__class__ is list) and _value_has_unknown(kind, value):
            return True
    return False


def _value_has_unknown(kind: str, value: Any) -> bool:
    shape, inner = _shape(kind)
    if value.__class__ is dict:
        if shape is _MODEL:
            return _has_unknown(inner, value)
        if shape is _MAP:
            for item in value.values():
                if (item.__class__ is dict or item.__class__ is list) and _value_has_unknown(inner, item):
                    return True
        return False
    if value.__class__ is list and shape is _ARRAY:
        for item in value:
            if (item.__class__ is dict or item.__class__ is list) and _value_has_unknown(inner, item):
                return True
    return False


_MODEL, _MAP, _ARRAY, _OTHER = "model", "map", "array", "other"


@functools.cache
def _shape(kind: str) -> tuple[str, Any]:
    """What a type name of the client's models is: (_MODEL, its fields), (_MAP or _ARRAY, the item type name) or
    (_OTHER, None) for scalars and free-form objects."""
    if kind.startswith("Dict["):
        return _MAP, kind[10:-1]
    if kind.startswith("List["):
        return _ARRAY, kind[5:-1]
    fields = _fields(kind) if kind[:1].isupper() else None
    return (_OTHER, None) if fields is None else (_MODEL, fields)


def _prune_model(fields: dict[str, str], obj: dict[str, Any], path: str, unknown: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in obj.items():
        kind = fields.get(key)
        where = f"{path}.{key}" if path else key
        if kind is None:
            unknown.append(where)
            continue
        result[key] = _prune(kind, value, where, unknown)
    return result


def _prune(kind: str, value: Any, path: str, unknown: list[str]) -> Any:
    if isinstance(value, dict):
        match = _DICT.match(kind)
        if match:
            return {key: _prune(match.group(1), item, f"{path}.{key}", unknown) for key, item in value.items()}
        fields = _fields(kind) if kind[:1].isupper() else None
        return _prune_model(fields, value, path, unknown) if fields is not None else value
    if isinstance(value, list):
        match = _LIST.match(kind)
        if match:
            return [_prune(match.group(1), item, f"{path}[{index}]", unknown) for index, item in enumerate(value)]
    return value
