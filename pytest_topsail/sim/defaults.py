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
    if rtype.kind == "Event":
        return  # event names embed the object name plus a suffix and are never user-facing
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
    elif key == ("batch", "jobs"):
        _default_job(obj)
    elif key in (("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")):
        spec = dict(obj.get("spec") or {})
        spec.setdefault("replicas", 1)
        obj["spec"] = spec
        if key == ("apps", "deployments"):
            spec.setdefault("revisionHistoryLimit", 10)
            spec.setdefault("progressDeadlineSeconds", 600)
            spec.setdefault("strategy", {"type": "RollingUpdate",
                                         "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})


def _default_job(obj: dict[str, Any]) -> None:
    spec = dict(obj.get("spec") or {})
    spec.setdefault("parallelism", 1)
    spec.setdefault("completions", 1)
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
    """400 when the body's kind/apiVersion do not match the URL's resource (absent ones are filled in)."""
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if kind and kind != rtype.kind:
        raise ApiError(400, "BadRequest", f"the object provided is unrecognized (must be of type {rtype.kind}): "
                                          f"{kind} is not {rtype.kind}")
    if api_version and api_version.split("/")[0] != rtype.api_version.split("/")[0] and rtype.group:
        raise ApiError(400, "BadRequest", f"the API version in the data ({api_version}) does not match the expected "
                                          f"API version ({rtype.api_version})")
