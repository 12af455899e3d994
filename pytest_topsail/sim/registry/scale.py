"""The scale subresource of workloads (``deployments/{name}/scale`` and the like): the autoscaling/v1 Scale view of
``spec.replicas`` (``scale_of``) and a change of it (``set_scale``: 409 on a stale resourceVersion, 422 unless the
replicas are a non-negative integer). The API server decodes the request and calls these."""

from __future__ import annotations

from typing import Any

from pytest_topsail.sim.machinery import apierror
from pytest_topsail.sim.machinery.resources import ResourceType
from pytest_topsail.sim.registry.patch import MERGE_PATCH
from pytest_topsail.sim.registry.store import Store


def scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    metadata, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    match_labels = (spec.get("selector") or {}).get("matchLabels") or {}
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {key: metadata[key] for key in ("name", "namespace", "uid", "resourceVersion",
                                                        "creationTimestamp") if key in metadata},
            "spec": {"replicas": spec.get("replicas", 1)},
            "status": {"replicas": status.get("replicas", 0),
                       "selector": ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))}}


def check_fresh(rtype: ResourceType, obj: dict[str, Any], wanted: Any) -> None:
    """409 when the Scale sent names a resourceVersion other than the object's."""
    stale = ((wanted or {}).get("metadata") or {}).get("resourceVersion")
    if stale and stale != obj["metadata"]["resourceVersion"]:
        raise apierror.conflict(rtype.plural, rtype.group, obj["metadata"]["name"])


def set_scale(store: Store, rtype: ResourceType, obj: dict[str, Any], wanted: Any, manager: str) -> dict[str, Any]:
    """Store the replicas of the Scale ``wanted``; the object as stored."""
    name = obj["metadata"]["name"]
    replicas = ((wanted or {}).get("spec") or {}).get("replicas")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        cause = f"Invalid value: {replicas!r}: must be a non-negative integer"
        raise apierror.invalid("Scale", "autoscaling", name, [("spec.replicas", cause)])
    return store.patch(rtype, obj["metadata"].get("namespace"), name, {"spec": {"replicas": replicas}}, MERGE_PATCH,
                       manager=manager)
