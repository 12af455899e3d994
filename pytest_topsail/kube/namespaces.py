"""Namespace helpers: create (an existing one is kept), delete several and wait until they are gone."""

from __future__ import annotations

import time

from pytest_topsail.kube.client import Kube, KubeConnectionError, KubeError, ObjectRef, WatchStop

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


def delete_namespaces(kube: Kube, names: list[str], timeout: float = 60.0, recheck: float = 2.0) -> list[str]:
    """Delete whole namespaces (the cluster deletes their content) and follow them by watch, for up to `timeout`
    seconds, until they are gone; returns the names still present then (or whose presence could not be checked).

    A namespace whose deletion has not started (its delete failed even after the layer's retries) is asked again
    every `recheck` seconds, so one lost request never leaves a namespace behind. A cluster that stops answering
    ends the wait at once: every name not yet seen gone is returned."""
    deadline = time.monotonic() + timeout
    remaining = list(names)
    while remaining:
        try:
            remaining = [name for name in remaining if _still_there(kube, name)]
        except KubeConnectionError:
            return remaining
        left = deadline - time.monotonic()
        if not remaining or left <= 0:
            return remaining
        try:
            remaining = _watch_gone(kube, remaining, min(left, recheck))
        except KubeConnectionError:
            return remaining
        except KubeError:
            time.sleep(min(0.2, max(deadline - time.monotonic(), 0.0)))  # the list was refused: checked again
    return remaining


def _watch_gone(kube: Kube, names: list[str], timeout: float) -> list[str]:
    """Watch namespaces for up to `timeout` seconds; the `names` not seen gone (absent from the first list or
    deleted since) by then."""
    waiting = set(names)
    present: set[str] = set()
    listed = False
    stop = WatchStop()

    def on_listed() -> None:
        nonlocal listed
        listed = True
        waiting.intersection_update(present)
        if not waiting:
            stop.set()  # all gone already: the watch request that follows returns at once

    for event_type, namespace in kube.watch("v1", "Namespace", timeout=timeout, stop=stop, on_listed=on_listed):
        name = (namespace.get("metadata") or {}).get("name", "")
        if not listed:
            present.add(name)
            continue
        if event_type == "DELETED":
            waiting.discard(name)
        if not waiting:
            break
    return [name for name in names if name in waiting]


def _still_there(kube: Kube, name: str) -> bool:
    """Ask for the deletion of namespace `name` unless it is under way; False once it is gone."""
    try:
        namespace = kube.get(namespace_ref(name))
        if namespace is None:
            return False
        if not (namespace.get("metadata") or {}).get("deletionTimestamp"):
            kube.delete(namespace_ref(name))
    except KubeConnectionError:
        raise
    except KubeError:
        pass  # unknown for now: checked again
    return True
