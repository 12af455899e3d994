"""Namespace helpers: create (an existing one is kept), delete several and wait until they are gone."""

from __future__ import annotations

from pytest_topsail.kube.client import Kube, KubeConnectionError, KubeError, ObjectRef
from pytest_topsail.kube.wait import RECHECK_S, DeleteTimeout, delete_and_wait

# A namespace the user asked to keep (`keep` settings): no removal of what a killed run left deletes it, and
# `kubectl get namespaces -l topsail.kept=true` lists every kept namespace.
KEPT_LABEL = "topsail.kept"
KEPT = {KEPT_LABEL: "true"}


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


def delete_namespaces(kube: Kube, names: list[str], timeout: float = 60.0, recheck: float = RECHECK_S) -> list[str]:
    """Delete whole namespaces (the cluster deletes their content) and follow them by watch, for up to `timeout`
    seconds, until they are gone; returns the names still present then (or whose presence could not be checked).

    `pytest_topsail.kube.wait.delete_and_wait` does the work: a namespace whose deletion has not started is asked
    again every `recheck` seconds; a cluster that stops answering ends the wait at once (every name not yet seen
    gone is returned)."""
    refs = [namespace_ref(name) for name in names]
    try:
        delete_and_wait(kube, refs, timeout=timeout, recheck=recheck)
    except DeleteTimeout as timed_out:
        return [ref.name for ref in timed_out.left]
    except KubeConnectionError:
        return list(names)
    return []
