"""Structural schemas of custom resources, enforced as kube-apiserver does on create, update, patch and apply.

A CRD version's ``openAPIV3Schema`` is compiled once (``compile_schema``) and kept per served version by the store.
``admit`` then does, in the apiserver's order:
1. pruning: fields the schema does not declare are dropped (``x-kubernetes-preserve-unknown-fields`` keeps them;
   ``apiVersion``, ``kind`` and ``metadata`` are implicit at the root and in ``x-kubernetes-embedded-resource``
   objects, whose ``metadata`` keeps only ObjectMeta's fields). Their paths are reported to the caller, which warns
   (fieldValidation=Warn, the default), refuses with 400 (Strict) or says nothing (Ignore);
2. defaulting: ``default`` values fill absent fields; a null in a field that is not ``nullable`` is defaulted when
   the schema has a default, else dropped;
3. validation: ``type`` (``x-kubernetes-int-or-string`` takes an integer or a string), ``required``, ``enum``,
   ``pattern``, ``minimum``/``maximum`` (and exclusive), ``minLength``/``maxLength``, ``minItems``/``maxItems``,
   ``minProperties``/``maxProperties``, ``x-kubernetes-list-type: set|map`` duplicates; the causes carry
   kube-apiserver's messages (``spec.replicas: Invalid value: "string": spec.replicas in body must be of type
   integer: "string"``).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any

UNSET: Any = object()
OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
    "managedFields"})
_RESOURCE_FIELDS = frozenset({"apiVersion", "kind", "metadata"})
FIELD_VALIDATION = ("Ignore", "Warn", "Strict")


@dataclass(slots=True)
class Schema:
    """One compiled node of a structural schema."""

    type: str = ""
    properties: dict[str, Schema] | None = None
    items: Schema | None = None
    additional: Schema | None = None  # additionalProperties with a schema: a map
    any_additional: bool = False  # additionalProperties: true
    required: tuple[str, ...] = ()
    enum: tuple[Any, ...] | None = None
    pattern: re.Pattern[str] | None = None
    pattern_text: str = ""
    int_or_string: bool = False
    preserve_unknown: bool = False
    embedded: bool = False
    nullable: bool = False
    default: Any = UNSET
    limits: dict[str, Any] = field(default_factory=dict)
    list_type: str = ""
    list_map_keys: tuple[str, ...] = ()
    has_defaults: bool = False  # this node or one below it has a default
    defaulted: tuple[tuple[str, Schema], ...] = ()  # the properties with a default
    checks_scalars: bool = True  # a scalar value can fail this node (it has a type, enum, pattern or limits)


@dataclass
class FieldValidation:
    """The request's fieldValidation directive and the warnings the write produced (``Warning`` headers)."""

    directive: str = "Warn"
    warnings: list[str] = field(default_factory=list)


_LIMIT_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems",
               "maxItems", "minProperties", "maxProperties")


def compile_schema(raw: dict[str, Any]) -> Schema:
    """Compile an openAPIV3Schema (a dict). ValueError naming the path when it is not usable."""
    return _compile(raw, "openAPIV3Schema")


def _compile(raw: Any, path: str) -> Schema:
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: must be an object")
    node = Schema(type=str(raw.get("type") or ""), nullable=bool(raw.get("nullable")),
                  int_or_string=bool(raw.get("x-kubernetes-int-or-string")),
                  preserve_unknown=bool(raw.get("x-kubernetes-preserve-unknown-fields")),
                  embedded=bool(raw.get("x-kubernetes-embedded-resource")),
                  required=tuple(raw.get("required") or ()), list_type=str(raw.get("x-kubernetes-list-type") or ""),
                  list_map_keys=tuple(raw.get("x-kubernetes-list-map-keys") or ()))
    if "properties" in raw:
        node.properties = {name: _compile(sub, f"{path}.properties[{name}]")
                           for name, sub in (raw["properties"] or {}).items()}
    if "items" in raw:
        node.items = _compile(raw["items"], f"{path}.items")
    additional = raw.get("additionalProperties")
    if isinstance(additional, dict):
        node.additional = _compile(additional, f"{path}.additionalProperties")
    elif additional is True:
        node.any_additional = True
    if raw.get("enum") is not None:
        node.enum = tuple(raw["enum"])
    if raw.get("pattern"):
        node.pattern_text = str(raw["pattern"])
        try:
            node.pattern = re.compile(node.pattern_text)
        except re.error as error:
            raise ValueError(f"{path}.pattern: {error}") from error
    if "default" in raw:
        node.default = raw["default"]
    node.limits = {key: raw[key] for key in _LIMIT_KEYS if raw.get(key) not in (None, False)}
    node.checks_scalars = bool(node.type or node.int_or_string or node.enum is not None or node.pattern
                               or node.limits)
    node.defaulted = tuple((name, sub) for name, sub in (node.properties or {}).items() if sub.default is not UNSET)
    children = [*(node.properties or {}).values(), node.items, node.additional]
    node.has_defaults = node.default is not UNSET or any(child.has_defaults for child in children if child)
    return node


def is_open(schema: Schema) -> bool:
    """A schema that accepts any object unchanged (``{type: object, x-kubernetes-preserve-unknown-fields: true}``)."""
    return (schema.preserve_unknown and not schema.properties and not schema.required and schema.additional is None
            and not schema.has_defaults and not schema.limits)


# ----------------------------------------------------------------- pruning and defaulting
def admit(schema: Schema, obj: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[tuple[str, str]]]:
    """(the pruned and defaulted object, the paths of the unknown fields dropped, the validation causes)."""
    unknown: list[str] = []
    result = _prune_resource(schema, obj, "", unknown)
    causes: list[tuple[str, str]] = []
    _validate(schema, result, "", causes, root=True)
    return result, unknown, causes


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _prune_resource(schema: Schema, obj: dict[str, Any], path: str, unknown: list[str]) -> dict[str, Any]:
    """An object with apiVersion/kind/metadata (the root, an embedded resource)."""
    result = _prune_object(schema, obj, path, unknown, implicit=_RESOURCE_FIELDS)
    metadata = result.get("metadata")
    if isinstance(metadata, dict):
        extra = [key for key in metadata if key not in OBJECT_META_FIELDS]
        if extra:
            unknown.extend(f"{_join(path, 'metadata')}.{key}" for key in extra)
            result["metadata"] = {key: value for key, value in metadata.items() if key in OBJECT_META_FIELDS}
    return result


def _prune(schema: Schema, value: Any, path: str, unknown: list[str]) -> Any:
    if isinstance(value, dict):
        if schema.embedded:
            return _prune_resource(schema, value, path, unknown)
        return _prune_object(schema, value, path, unknown)
    if isinstance(value, list) and schema.items is not None:
        return [_prune(schema.items, item, f"{path}[{index}]", unknown) for index, item in enumerate(value)]
    return value


def _prune_object(schema: Schema, obj: dict[str, Any], path: str, unknown: list[str],
                  implicit: frozenset[str] = frozenset()) -> dict[str, Any]:
    properties = schema.properties
    result: dict[str, Any] = {}
    for key, value in obj.items():
        if key in implicit:
            result[key] = value
            continue
        sub = properties.get(key) if properties is not None else None
        if sub is None:
            sub = schema.additional
        if sub is None:
            if key in implicit or schema.preserve_unknown or schema.any_additional:
                result[key] = value
            else:
                unknown.append(_join(path, key))
            continue
        where = _join(path, key)
        if value is None and not sub.nullable:
            if sub.default is not UNSET:
                result[key] = copy.deepcopy(sub.default)
            continue  # a null in a field that is not nullable is dropped
        result[key] = _prune(sub, value, where, unknown)
    for key, sub in schema.defaulted:
        if key not in result:
            result[key] = _prune(sub, copy.deepcopy(sub.default), _join(path, key), [])
    return result


# ----------------------------------------------------------------- validation
_TYPE_NAMES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array",
                                dict: "object", type(None): "null"}


def _json_type(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), "object")


def _quote(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value, separators=(",", ":"))


def _validate(schema: Schema, value: Any, path: str, causes: list[tuple[str, str]], root: bool = False) -> None:
    kind = _TYPE_NAMES.get(type(value), "object")
    wanted = schema.type
    if kind == "null":
        if not schema.nullable and wanted:
            causes.append((path, f'Invalid value: "null": {path} in body must be of type {wanted}: "null"'))
        return
    if schema.int_or_string:
        if kind != "integer" and kind != "string":
            causes.append((path, f'Invalid value: "{kind}": {path} in body must be of type integer,string: '
                                 f'"{kind}"'))
            return
    elif wanted and kind != wanted and not (wanted == "number" and kind == "integer"):
        causes.append((path, f'Invalid value: "{kind}": {path} in body must be of type {wanted}: "{kind}"'))
        return
    if schema.enum is not None and value not in schema.enum:
        choices = ", ".join(_quote(choice) for choice in schema.enum)
        causes.append((path, f"Unsupported value: {_quote(value)}: supported values: {choices}"))
    if schema.limits:
        _check_limits(schema, value, path, causes)
    if kind == "string":
        if schema.pattern is not None and not schema.pattern.search(value):
            causes.append((path, f"Invalid value: {_quote(value)}: {path} in body should match "
                                 f"'{schema.pattern_text}'"))
    elif kind == "object":
        for name in schema.required:
            if name not in value:
                causes.append((_join(path, name), "Required value"))
        properties, additional = schema.properties, schema.additional
        for key, item in value.items():
            if root and key in _RESOURCE_FIELDS:
                continue
            sub = properties.get(key) if properties is not None else None
            if sub is None:
                sub = additional
            if sub is not None and (item.__class__ in _CONTAINERS or sub.checks_scalars):
                _validate(sub, item, f"{path}.{key}" if path else key, causes)
    elif kind == "array" and schema.items is not None:
        items = schema.items
        for index, item in enumerate(value):
            if item.__class__ in _CONTAINERS or items.checks_scalars:
                _validate(items, item, f"{path}[{index}]", causes)
        if schema.list_type:
            _check_list_type(schema, value, path, causes)


_CONTAINERS = (dict, list)


def _check_limits(schema: Schema, value: Any, path: str, causes: list[tuple[str, str]]) -> None:
    limits = schema.limits
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = limits.get("minimum"), limits.get("maximum")
        if low is not None and (value <= low if limits.get("exclusiveMinimum") else value < low):
            words = "greater than" if limits.get("exclusiveMinimum") else "greater than or equal to"
            causes.append((path, f"Invalid value: {_quote(value)}: {path} in body should be {words} {low}"))
        if high is not None and (value >= high if limits.get("exclusiveMaximum") else value > high):
            words = "less than" if limits.get("exclusiveMaximum") else "less than or equal to"
            causes.append((path, f"Invalid value: {_quote(value)}: {path} in body should be {words} {high}"))
    elif isinstance(value, str):
        if "maxLength" in limits and len(value) > limits["maxLength"]:
            causes.append((path, f"Too long: may not be more than {limits['maxLength']} bytes"))
        if "minLength" in limits and len(value) < limits["minLength"]:
            causes.append((path, f"Invalid value: {_quote(value)}: {path} in body should be at least "
                                 f"{limits['minLength']} chars long"))
    elif isinstance(value, list):
        if "maxItems" in limits and len(value) > limits["maxItems"]:
            causes.append((path, f"Too many: {len(value)}: must have at most {limits['maxItems']} items"))
        if "minItems" in limits and len(value) < limits["minItems"]:
            causes.append((path, f"Invalid value: {len(value)}: {path} in body should have at least "
                                 f"{limits['minItems']} items"))
    elif isinstance(value, dict):
        if "maxProperties" in limits and len(value) > limits["maxProperties"]:
            causes.append((path, f"Too many: {len(value)}: must have at most {limits['maxProperties']} items"))
        if "minProperties" in limits and len(value) < limits["minProperties"]:
            causes.append((path, f"Invalid value: {len(value)}: {path} in body should have at least "
                                 f"{limits['minProperties']} properties"))


def _check_list_type(schema: Schema, value: list[Any], path: str, causes: list[tuple[str, str]]) -> None:
    if schema.list_type not in ("set", "map"):
        return
    seen: list[Any] = []
    for index, item in enumerate(value):
        key = item
        if schema.list_type == "map" and isinstance(item, dict):
            key = {name: item.get(name) for name in schema.list_map_keys}
        if key in seen:
            causes.append((f"{path}[{index}]", f"Duplicate value: {_quote(key)}"))
        else:
            seen.append(key)


# ----------------------------------------------------------------- messages
def strict_error_message(kind: str, version: str, unknown: list[str]) -> str:
    fields = ", ".join(f'unknown field "{path}"' for path in unknown)
    return f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: {fields}'


def unknown_field_warning(path: str) -> str:
    return f'unknown field "{path}"'
