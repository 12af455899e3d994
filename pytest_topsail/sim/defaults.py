"""Per-kind defaulting and validation done by the apiserver on create/update (a small, documented subset)."""

from __future__ import annotations

import re
from typing import Any

from .apierror import ApiError, invalid
from .resources import ResourceType

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Kinds whose names must be DNS-1123 labels rather than subdomains.
_LABEL_NAMED = {"Namespace", "Service"}


def validate_name(rtype: ResourceType, name: str) -> None:
    pattern, limit = (_DNS_LABEL, 63) if rtype.kind in _LABEL_NAMED else (_DNS_SUBDOMAIN, 253)
    if rtype.kind in ("Event", "APIService"):
        return  # event names embed the object name plus a suffix; the core group's APIService is "v1."
    if len(name) > limit or not pattern.match(name):
        raise invalid(rtype.kind, rtype.group, name, [(
            "metadata.name",
            f'Invalid value: "{name}": a lowercase RFC 1123 {"label" if limit == 63 else "subdomain"} must consist of '
            "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        )])


def validate(rtype: ResourceType, obj: dict[str, Any]) -> None:
    """Kind-specific checks: 422 Invalid with the offending fields."""
    name = obj["metadata"].get("name", "")
    causes: list[tuple[str, str]] = []
    spec = obj.get("spec")
    if rtype.key == ("", "pods"):
        containers = (spec or {}).get("containers")
        if not isinstance(containers, list) or not containers:
            causes.append(("spec.containers", "Required value"))
        else:
            for index, container in enumerate(containers):
                if not isinstance(container, dict) or not container.get("name"):
                    causes.append((f"spec.containers[{index}].name", "Required value"))
                elif not container.get("image"):
                    causes.append((f"spec.containers[{index}].image", "Required value"))
    elif rtype.key in (("batch", "jobs"), ("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")):
        template = (spec or {}).get("template")
        if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
            causes.append(("spec.template", "Required value"))
        elif not template["spec"].get("containers"):
            causes.append(("spec.template.spec.containers", "Required value"))
    for label, value in (obj["metadata"].get("labels") or {}).items():
        if not isinstance(value, str) or len(value) > 63:
            causes.append((f"metadata.labels.{label}", f"Invalid value: {value!r}: must be a string of <= 63 chars"))
    if causes:
        raise invalid(rtype.kind, rtype.group, name, causes)


def _qos_class(spec: dict[str, Any]) -> str:
    requests_any = limits_all = False
    containers = spec.get("containers") or []
    limits_all = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        requests_any = requests_any or bool(requests) or bool(limits)
        if not ("cpu" in limits and "memory" in limits) or any(limits.get(k) != v for k, v in requests.items()):
            limits_all = False
    if limits_all:
        return "Guaranteed"
    return "Burstable" if requests_any else "BestEffort"


def apply_create_defaults(rtype: ResourceType, obj: dict[str, Any]) -> None:
    """Fill defaults on a freshly copied object (top-level containers may be replaced, never mutated in place)."""
    key = rtype.key
    if key == ("", "pods"):
        spec = dict(obj.get("spec") or {})
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("tolerations", [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
        ])
        obj["spec"] = spec
        status = dict(obj.get("status") or {})
        status.setdefault("phase", "Pending")
        status.setdefault("qosClass", _qos_class(spec))
        obj["status"] = status
    elif key == ("", "namespaces"):
        metadata = obj["metadata"]
        labels = dict(metadata.get("labels") or {})
        labels.setdefault("kubernetes.io/metadata.name", metadata["name"])
        metadata["labels"] = labels
        obj["spec"] = {"finalizers": ["kubernetes"], **(obj.get("spec") or {})}
        obj["status"] = {"phase": "Active"}
    elif key == ("", "services"):
        obj["status"] = {"loadBalancer": {}, **(obj.get("status") or {})}
    elif key == ("", "secrets"):
        obj["type"] = obj.get("type") or "Opaque"
    elif key == ("batch", "jobs"):
        _default_job(obj)
    elif key in (("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")):
        spec = dict(obj.get("spec") or {})
        spec.setdefault("replicas", 1)
        obj["spec"] = spec
        if key == ("apps", "deployments"):
            spec.setdefault("revisionHistoryLimit", 10)
            spec.setdefault("progressDeadlineSeconds", 600)
            if not spec.get("strategy"):
                spec["strategy"] = {"type": "RollingUpdate",
                                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}


def _default_job(obj: dict[str, Any]) -> None:
    spec = dict(obj.get("spec") or {})
    if "completions" not in spec and "parallelism" not in spec:  # only then, like the apiserver: work queues
        spec["completions"] = 1                                     # (parallelism alone) keep completions unset
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    uid = obj["metadata"]["uid"]
    name = obj["metadata"]["name"]
    if "selector" not in spec and not spec.get("manualSelector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        template = dict(spec.get("template") or {})
        template_metadata = dict(template.get("metadata") or {})
        labels = dict(template_metadata.get("labels") or {})
        labels.update({
            "batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
            "batch.kubernetes.io/job-name": name, "job-name": name,
        })
        template_metadata["labels"] = labels
        template["metadata"] = template_metadata
        spec["template"] = template
    obj["spec"] = spec


def check_kind(rtype: ResourceType, obj: dict[str, Any]) -> None:
    """400 when the body's kind/apiVersion do not match the URL's resource (absent ones are filled in) or when a
    field has a JSON type the apiserver could not decode."""
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if kind and kind != rtype.kind:
        raise ApiError(400, "BadRequest", f"the object provided is unrecognized (must be of type {rtype.kind}): "
                                          f"{kind} is not {rtype.kind}")
    if api_version and (not isinstance(api_version, str) or api_version.rpartition("/")[0] != rtype.group):
        raise ApiError(400, "BadRequest", f"the API version in the data ({api_version}) does not match the expected "
                                          f"API version ({rtype.api_version})")
    _check_structure(rtype, obj)


_GO_TYPES = {bool: "bool", int: "number", float: "number", str: "string", list: "array", dict: "object"}


def _undecodable(value: Any, field: str, go_type: str) -> ApiError:
    found = "null" if value is None else _GO_TYPES.get(type(value), "value")
    return ApiError(400, "BadRequest", f"json: cannot unmarshal {found} into Go struct field {field} of type {go_type}")


def _check_string_map(value: Any, field: str) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise _undecodable(value, field, "map[string]string")
    for item in value.values():
        if not isinstance(item, str):
            raise _undecodable(item, field, "string")


def _check_structure(rtype: ResourceType, obj: dict[str, Any]) -> None:
    """The decoding errors of the apiserver for the fields every object has and the common built-in maps."""
    metadata = obj.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _undecodable(metadata, f"{rtype.kind}.metadata", "v1.ObjectMeta")
    for key in ("labels", "annotations"):
        _check_string_map((metadata or {}).get(key), f"ObjectMeta.metadata.{key}")
    for key in ("name", "generateName", "namespace", "resourceVersion"):
        value = (metadata or {}).get(key)
        if value is not None and not isinstance(value, str):
            raise _undecodable(value, f"ObjectMeta.metadata.{key}", "string")
    if rtype.crd_name:
        return
    for key in ("spec", "status"):
        if obj.get(key) is not None and not isinstance(obj[key], dict):
            raise _undecodable(obj[key], f"{rtype.kind}.{key}", f"v1.{rtype.kind}{key.capitalize()}")
    if rtype.key in (("", "configmaps"), ("", "secrets")):
        for key in ("data", "binaryData", "stringData"):
            _check_string_map(obj.get(key), f"{rtype.kind}.{key}")
    spec_schema = _SPEC_SCHEMAS.get(rtype.key)
    if spec_schema is not None and obj.get("spec") is not None:
        _check_typed(obj["spec"], spec_schema, f"{rtype.kind}.spec")


# Decoding types of the fields the simulator's controllers read: a dict is a struct (unknown keys are kept, as the
# apiserver does without strict field validation), a one-element list is an array of that, QUANTITY a resource
# quantity, STRING_MAP a map[string]string, OBJECT any JSON object.
QUANTITY = "quantity"
STRING_MAP = "map[string]string"
OBJECT = "object"
_QUANTITY = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_RESOURCES = {"requests": {"*": QUANTITY}, "limits": {"*": QUANTITY}}
_CONTAINER = {"name": str, "image": str, "command": [str], "args": [str], "workingDir": str,
              "resources": _RESOURCES, "env": [{"name": str, "value": str}], "ports": [{"containerPort": int}],
              "volumeMounts": [{"name": str, "mountPath": str}]}
_TOLERATION = {"key": str, "operator": str, "value": str, "effect": str, "tolerationSeconds": int}
_POD_SPEC = {"containers": [_CONTAINER], "initContainers": [_CONTAINER], "nodeSelector": STRING_MAP,
             "nodeName": str, "restartPolicy": str, "schedulerName": str, "serviceAccountName": str,
             "tolerations": [_TOLERATION], "affinity": OBJECT, "priority": int, "priorityClassName": str,
             "terminationGracePeriodSeconds": int, "activeDeadlineSeconds": int, "volumes": [{"name": str}],
             "hostNetwork": bool}
_TEMPLATE = {"metadata": {"labels": STRING_MAP, "annotations": STRING_MAP}, "spec": _POD_SPEC}
_SELECTOR = {"matchLabels": STRING_MAP, "matchExpressions": [{"key": str, "operator": str, "values": [str]}]}
_SPEC_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("", "pods"): _POD_SPEC,
    ("", "services"): {"selector": STRING_MAP, "type": str, "ports": [{"port": int}]},
    ("", "persistentvolumeclaims"): {"storageClassName": str, "accessModes": [str], "resources": _RESOURCES},
    ("batch", "jobs"): {"parallelism": int, "completions": int, "backoffLimit": int, "activeDeadlineSeconds": int,
                        "suspend": bool, "selector": _SELECTOR, "template": _TEMPLATE, "completionMode": str},
    ("apps", "deployments"): {"replicas": int, "selector": _SELECTOR, "template": _TEMPLATE, "paused": bool},
    ("apps", "replicasets"): {"replicas": int, "selector": _SELECTOR, "template": _TEMPLATE},
    ("apps", "statefulsets"): {"replicas": int, "selector": _SELECTOR, "template": _TEMPLATE, "serviceName": str},
}
_SCALAR_NAMES = {str: "string", int: "int32", bool: "bool"}


def _check_typed(value: Any, schema: Any, field: str) -> None:
    """400 with the apiserver's decoding message when ``value`` does not have the type ``schema`` describes."""
    if value is None:
        return
    if schema is OBJECT:
        if not isinstance(value, dict):
            raise _undecodable(value, field, "object")
    elif schema is STRING_MAP:
        _check_string_map(value, field)
    elif schema is QUANTITY:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or not _QUANTITY.match(str(value)):
            raise ApiError(400, "BadRequest", f"{field}: quantities must match the regular expression "
                                              f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    elif isinstance(schema, list):
        if not isinstance(value, list):
            raise _undecodable(value, field, "[]" + _type_name(schema[0]))
        for item in value:
            _check_typed(item, schema[0], field)
    elif isinstance(schema, dict):
        if not isinstance(value, dict):
            raise _undecodable(value, field, "object")
        for key, item in value.items():
            item_schema = schema.get(key, schema.get("*"))
            if item_schema is not None:
                _check_typed(item, item_schema, f"{field}.{key}" if "*" not in schema else f"{field}[{key}]")
    elif not _is_scalar(value, schema):
        raise _undecodable(value, field, _SCALAR_NAMES[schema])


def _is_scalar(value: Any, expected: type) -> bool:
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool) or (isinstance(value, float)
                                                                          and value.is_integer())
    return isinstance(value, expected)


def _type_name(schema: Any) -> str:
    if isinstance(schema, type):
        return _SCALAR_NAMES[schema]
    return schema if isinstance(schema, str) else "object"
