"""Per-kind defaulting and validation done by the apiserver on create/update (a small, documented subset)."""

from __future__ import annotations

import functools
import json
import re
from fractions import Fraction
from typing import Any

from pytest_topsail.kube.quantity import MAX_EXPONENT, QuantityRangeError, read_quantity
from pytest_topsail.sim.machinery.apierror import ApiError, invalid
from pytest_topsail.sim.machinery.resources import ResourceType

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# The apiserver's messages (k8s.io/apimachinery/pkg/util/validation), word for word.
SUBDOMAIN_MESSAGE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                     "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                     "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MESSAGE = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                 "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
DNS1035_MESSAGE = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                   "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                   "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
LABEL_VALUE_MESSAGE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
                       "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  "
                       "or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
NAME_PART_MESSAGE = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                     "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                     "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
# name validation per kind: (pattern, message, length limit); the rest are DNS-1123 subdomains.
_NAME_RULES = {"Namespace": (_DNS_LABEL, LABEL_MESSAGE, 63), "Service": (_DNS_1035, DNS1035_MESSAGE, 63)}
_SUBDOMAIN_RULE = (_DNS_SUBDOMAIN, SUBDOMAIN_MESSAGE, 253)
Causes = list[tuple[str, str]]


def validate_name(rtype: ResourceType, name: str) -> None:
    if rtype.kind in ("Event", "APIService"):
        return  # event names embed the object name plus a suffix; the core group's APIService is "v1."
    causes: Causes = []
    pattern, message, limit = _NAME_RULES.get(rtype.kind, _SUBDOMAIN_RULE)
    _check_dns(name, "metadata.name", pattern, message, limit, causes)
    if causes:
        raise invalid(rtype.kind, rtype.group, name, causes)


def _check_dns(value: str, path: str, pattern: re.Pattern[str], message: str, limit: int, causes: Causes) -> None:
    if len(value) > limit:
        causes.append((path, f"Invalid value: {_quote(value)}: must be no more than {limit} characters"))
    if not pattern.match(value):
        causes.append((path, f"Invalid value: {_quote(value)}: {message}"))


def _quote(value: Any) -> str:
    """A value as Go's %q / field.Invalid prints it."""
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps(value) if isinstance(value, str) else str(value)


def check_labels(labels: Any, path: str, causes: Causes) -> None:
    """Label keys (qualified names) and values, with the apiserver's messages."""
    if not isinstance(labels, dict):
        return
    for key, value in labels.items():
        if key.__class__ is str and value.__class__ is str and _valid_label(key, value):
            continue
        _check_label(str(key), value if isinstance(value, str) else str(value), path, causes)


@functools.lru_cache(maxsize=4096)  # the same few labels come with thousands of pods and nodes
def _valid_label(key: str, value: str) -> bool:
    causes: Causes = []
    _check_label(key, value, "", causes)
    return not causes


def _check_label(key: str, text: str, path: str, causes: Causes) -> None:
    check_qualified_name(key, path, causes)
    if len(text) > 63:
        causes.append((path, f"Invalid value: {_quote(text)}: must be no more than 63 characters"))
    if not _LABEL_VALUE.match(text):
        causes.append((path, f"Invalid value: {_quote(text)}: {LABEL_VALUE_MESSAGE}"))


def check_qualified_name(key: str, path: str, causes: Causes) -> None:
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        causes.append((path, f"Invalid value: {_quote(key)}: prefix part must be non-empty"))
    elif prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        causes.append((path, f"Invalid value: {_quote(key)}: prefix part {SUBDOMAIN_MESSAGE}"))
    if not name:
        causes.append((path, f"Invalid value: {_quote(key)}: name part must be non-empty"))
        return
    if len(name) > 63:
        causes.append((path, f"Invalid value: {_quote(key)}: name part must be no more than 63 characters"))
    if not _NAME_PART.match(name):
        causes.append((path, f"Invalid value: {_quote(key)}: {NAME_PART_MESSAGE}"))


def _not_supported(path: str, value: Any, supported: tuple[str, ...]) -> tuple[str, str]:
    choices = ", ".join(json.dumps(choice) for choice in supported)
    return path, f"Unsupported value: {_quote(value)}: supported values: {choices}"


_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_WORKLOAD_TEMPLATES = {("batch", "jobs"): ("OnFailure", "Never"), ("apps", "deployments"): ("Always",),
                       ("apps", "replicasets"): ("Always",), ("apps", "statefulsets"): ("Always",),
                       ("apps", "daemonsets"): ("Always",)}


def validate(rtype: ResourceType, obj: dict[str, Any], stored: dict[str, Any] | None = None, *,
             spec_checked: bool = False) -> None:
    """Kind-specific checks: 422 Invalid with the offending fields, as the apiserver words them. ``stored``: the
    version being updated; the parts ``obj`` shares with it (the same objects) were checked when it was stored.
    ``spec_checked``: everything outside ``metadata`` passed these checks before (only the labels are checked)."""
    name = obj["metadata"].get("name", "")
    causes: Causes = []
    spec = obj.get("spec")
    stored_spec = (stored or {}).get("spec")
    if spec_checked:
        pass
    elif rtype.key == ("", "pods"):
        if not _same_parts(spec, stored_spec, ("containers", "initContainers", "restartPolicy")):
            _check_pod_spec(spec if isinstance(spec, dict) else {}, "spec", causes)
    elif rtype.key in _WORKLOAD_TEMPLATES and not _same_parts(spec, stored_spec, ("template",)):
        template = (spec or {}).get("template")
        if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
            causes.append(("spec.template", "Required value"))
        else:
            check_labels((template.get("metadata") or {}).get("labels"), "spec.template.metadata.labels", causes)
            _check_pod_spec(template["spec"], "spec.template.spec", causes)
            allowed = _WORKLOAD_TEMPLATES[rtype.key]
            policy = template["spec"].get("restartPolicy") or "Always"  # the pod template's default
            if policy in _RESTART_POLICIES and policy not in allowed:
                causes.append(_not_supported("spec.template.spec.restartPolicy", policy, allowed))
    labels = obj["metadata"].get("labels")
    if stored is None or labels is not stored["metadata"].get("labels"):
        check_labels(labels, "metadata.labels", causes)
    if causes:
        raise invalid(rtype.kind, rtype.group, name, causes)


def _same_parts(spec: Any, stored_spec: Any, keys: tuple[str, ...]) -> bool:
    """Whether ``spec`` holds the very objects ``stored_spec`` holds at ``keys`` (an update that changed only other
    fields, such as a binding's nodeName)."""
    if spec is stored_spec:
        return spec is not None
    return isinstance(spec, dict) and isinstance(stored_spec, dict) and \
        all(spec.get(key) is stored_spec.get(key) for key in keys)


def _check_pod_spec(spec: dict[str, Any], path: str, causes: Causes) -> None:
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append((f"{path}.containers", "Required value"))
    for group in ("initContainers", "containers"):
        seen: set[str] = set()
        for index, container in enumerate(spec.get(group) or []):
            where = f"{path}.{group}[{index}]"
            if not isinstance(container, dict):
                continue
            name = container.get("name")
            if not name:
                causes.append((f"{where}.name", "Required value"))
            elif name in seen:
                causes.append((f"{where}.name", f"Duplicate value: {_quote(name)}"))
            else:
                seen.add(name)
                _check_dns(str(name), f"{where}.name", _DNS_LABEL, LABEL_MESSAGE, 63, causes)
            if not container.get("image"):
                causes.append((f"{where}.image", "Required value"))
            _check_container(container, where, causes)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in _RESTART_POLICIES:
        causes.append(_not_supported(f"{path}.restartPolicy", policy, _RESTART_POLICIES))


def _check_container(container: dict[str, Any], where: str, causes: Causes) -> None:
    pull = container.get("imagePullPolicy")
    if pull is not None and pull not in _PULL_POLICIES:
        causes.append(_not_supported(f"{where}.imagePullPolicy", pull, _PULL_POLICIES))
    for index, port in enumerate(container.get("ports") or []):
        if not isinstance(port, dict):
            continue
        number = port.get("containerPort")
        if isinstance(number, int) and not 1 <= number <= 65535:
            causes.append((f"{where}.ports[{index}].containerPort",
                           f"Invalid value: {number}: must be between 1 and 65535, inclusive"))
        protocol = port.get("protocol")
        if protocol is not None and protocol not in _PROTOCOLS:
            causes.append(_not_supported(f"{where}.ports[{index}].protocol", protocol, _PROTOCOLS))
    _check_resources(container.get("resources") or {}, f"{where}.resources", causes)


def _check_resources(resources: dict[str, Any], path: str, causes: Causes) -> None:
    """Extended resources (a domain-prefixed name outside kubernetes.io, e.g. nvidia.com/gpu) are whole numbers and
    cannot be overcommitted: a request needs a limit and must equal it (ValidateResourceRequirements)."""
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    if not isinstance(limits, dict) or not isinstance(requests, dict):
        return
    for kind, values in (("limits", limits), ("requests", requests)):
        for resource, quantity in values.items():
            if _is_extended(resource) and not _is_whole(quantity):
                causes.append((f"{path}.{kind}[{resource}]", f"Invalid value: {_quote(str(quantity))}: "
                                                            "must be an integer"))
    for resource, quantity in requests.items():
        if resource in limits:
            wanted, limit = parse_quantity(quantity), parse_quantity(limits[resource])
            if wanted is None or limit is None:
                continue
            if _is_extended(resource) and wanted != limit:
                causes.append((f"{path}.requests", f"Invalid value: {_quote(str(quantity))}: must be equal to "
                                                   f"{resource} limit of {limits[resource]}"))
            elif wanted > limit:
                causes.append((f"{path}.requests", f"Invalid value: {_quote(str(quantity))}: must be less than or "
                                                   f"equal to {resource} limit of {limits[resource]}"))
        elif _is_extended(resource):
            causes.append((f"{path}.limits", "Required value: Limit must be set for non overcommitable resources"))


def _is_extended(resource: str) -> bool:
    domain, slash, _ = resource.partition("/")
    return bool(slash) and not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io")) \
        and not resource.startswith("requests.")


def parse_quantity(value: Any) -> Fraction | None:
    """A resource quantity as an exact number; None when malformed or not in the apiserver's syntax."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Fraction(value)
    try:
        quantity = read_quantity(str(value))
    except ValueError:
        return None
    return quantity.exact if quantity.canonical else None


def _is_whole(quantity: Any) -> bool:
    parsed = parse_quantity(quantity)
    return parsed is None or parsed.denominator == 1


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
        for group in ("initContainers", "containers"):
            if isinstance(spec.get(group), list):
                spec[group] = [_default_requests(container) for container in spec[group]]
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


def _default_requests(container: Any) -> Any:
    """A limit with no request sets the request (SetDefaults_Pod)."""
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict):
        return container
    limits = resources.get("limits")
    if not isinstance(limits, dict) or not limits:
        return container
    requests = resources.get("requests") or {}
    if not isinstance(requests, dict) or all(key in requests for key in limits):
        return container
    return {**container, "resources": {**resources, "requests": {**limits, **requests}}}


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


def check_kind(rtype: ResourceType, obj: dict[str, Any], stored: dict[str, Any] | None = None) -> None:
    """400 when the body's kind/apiVersion do not match the URL's resource (absent ones are filled in) or when a
    field has a JSON type the apiserver could not decode. ``stored``: the version an update replaces; spec fields
    that are the very objects it holds were checked when it was stored (a controller's status update of a pod)."""
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if kind and kind != rtype.kind:
        raise ApiError(400, "BadRequest", f"the object provided is unrecognized (must be of type {rtype.kind}): "
                                          f"{kind} is not {rtype.kind}")
    if api_version and (not isinstance(api_version, str) or api_version.rpartition("/")[0] != rtype.group):
        raise ApiError(400, "BadRequest", f"the API version in the data ({api_version}) does not match the expected "
                                          f"API version ({rtype.api_version})")
    _check_structure(rtype, obj, (stored or {}).get("spec"), (stored or {}).get("metadata"))


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


def _check_structure(rtype: ResourceType, obj: dict[str, Any], checked_spec: Any = None,
                     checked_metadata: Any = None) -> None:
    """The decoding errors of the apiserver for the fields every object has and the common built-in maps (maps that
    are the very objects of ``checked_metadata``, the stored version's, were checked when it was stored)."""
    metadata = obj.get("metadata")
    if metadata is not None and metadata is not checked_metadata:  # a controller's write keeps the stored metadata
        _check_metadata(rtype, metadata, checked_metadata)
    if rtype.crd_name:
        return
    for key in ("spec", "status"):
        if obj.get(key) is not None and not isinstance(obj[key], dict):
            raise _undecodable(obj[key], f"{rtype.kind}.{key}", f"v1.{rtype.kind}{key.capitalize()}")
    if rtype.key in (("", "configmaps"), ("", "secrets")):
        for key in ("data", "binaryData", "stringData"):
            _check_string_map(obj.get(key), f"{rtype.kind}.{key}")
    spec_schema = _SPEC_SCHEMAS.get(rtype.key)
    spec = obj.get("spec")
    if spec_schema is not None and spec is not None and spec is not checked_spec:
        if isinstance(spec, dict) and isinstance(checked_spec, dict):
            spec = {key: value for key, value in spec.items() if checked_spec.get(key) is not value}
        if not _typed_ok(spec, spec_schema):
            _check_typed(spec, spec_schema, f"{rtype.kind}.spec")  # finds the field and words the error


def _check_metadata(rtype: ResourceType, metadata: Any, checked_metadata: Any) -> None:
    if not isinstance(metadata, dict):
        raise _undecodable(metadata, f"{rtype.kind}.metadata", "v1.ObjectMeta")
    for key in ("labels", "annotations"):
        value = metadata.get(key)
        if value is None or (isinstance(checked_metadata, dict) and checked_metadata.get(key) is value):
            continue
        _check_string_map(value, f"ObjectMeta.metadata.{key}")
    for key in ("name", "generateName", "namespace", "resourceVersion"):
        value = metadata.get(key)
        if value is not None and not isinstance(value, str):
            raise _undecodable(value, f"ObjectMeta.metadata.{key}", "string")


# Decoding types of the fields the simulator's controllers read: a dict is a struct (unknown keys are kept, as the
# apiserver does without strict field validation), a one-element list is an array of that, QUANTITY a resource
# quantity, STRING_MAP a map[string]string, OBJECT any JSON object.
QUANTITY = "quantity"
STRING_MAP = "map[string]string"
OBJECT = "object"
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


def _typed_ok(value: Any, schema: Any) -> bool:
    """Whether ``value`` has the type ``schema`` describes: ``_check_typed`` without building field paths, for the
    common case (every write of a pod or workload passes here)."""
    if value is None:
        return True
    schema_class = schema.__class__
    if schema_class is dict:
        if value.__class__ is not dict:
            return False
        wildcard = schema.get("*")
        for key, item in value.items():
            item_schema = schema.get(key, wildcard)
            if item_schema is not None and item is not None and not _typed_ok(item, item_schema):
                return False
        return True
    if schema_class is list:
        if value.__class__ is not list:
            return False
        item_schema = schema[0]
        return all(_typed_ok(item, item_schema) for item in value)
    if schema is str:
        return value.__class__ is str or isinstance(value, str)
    if schema is QUANTITY:
        return _quantity_problem(value) is None
    if schema is STRING_MAP:
        return isinstance(value, dict) and all(isinstance(item, str) for item in value.values())
    if schema is OBJECT:
        return isinstance(value, dict)
    return _is_scalar(value, schema)


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
        problem = _quantity_problem(value)
        if problem is not None:
            raise ApiError(400, "BadRequest", f"{field}: {problem}")
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


def _quantity_problem(value: Any) -> str | None:
    """Why the apiserver would not decode ``value`` as a quantity (its words); None when it would."""
    if not isinstance(value, bool) and isinstance(value, (str, int, float)):
        try:
            if read_quantity(str(value)).canonical:
                return None
        except QuantityRangeError:
            return f"unable to parse quantity's numeric part: exponent beyond {MAX_EXPONENT}"
        except ValueError:
            pass
    return "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def _is_scalar(value: Any, expected: type) -> bool:
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool) or (isinstance(value, float)
                                                                          and value.is_integer())
    return isinstance(value, expected)


def _type_name(schema: Any) -> str:
    if isinstance(schema, type):
        return _SCALAR_NAMES[schema]
    return schema if isinstance(schema, str) else "object"
