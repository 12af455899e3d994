"""Namespace helpers: create (an existing one is kept), delete several and wait until they are gone."""

from __future__ import annotations

import time

from pytest_topsail.kube.client import Kube, KubeError, ObjectRef


def namespace_ref(name: str) -> ObjectRef:
    return ObjectRef("v1", "Namespace", name)


def create_namespace(kube: Kube, name: str, labels: dict[str, str] | None = None) -> bool:
    """Create namespace `name` with `labels`; False when it existed already (it is then left as it is)."""
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}
    try:
        kube.create(body)
    except KubeError as exc:
        if exc.status == 409:
            return False
        raise
    return True


def namespace_exists(kube: Kube, name: str) -> bool:
    return kube.get(namespace_ref(name)) is not None


def delete_namespaces(kube: Kube, names: list[str], timeout: float = 60.0, interval: float = 0.2) -> list[str]:
    """Delete whole namespaces (one request each: the cluster deletes their content) and wait up to `timeout`
    seconds until they are gone; returns the names still present then."""
    for name in names:
        kube.delete(namespace_ref(name))
    deadline = time.monotonic() + timeout
    remaining = list(names)
    while remaining and time.monotonic() < deadline:
        remaining = [name for name in remaining if namespace_exists(kube, name)]
        if remaining:
            time.sleep(interval)
    return remaining
