"""Events about an object, and container logs."""

from __future__ import annotations

from typing import Any

from pytest_topsail.kube.client import Kube, KubeError, ObjectRef
from pytest_topsail.redact import redact_text


def events_for(kube: Kube, ref: ObjectRef) -> list[dict[str, Any]]:
    """core/v1 Events whose involvedObject is `ref`, oldest first.

    Events of cluster-scoped objects may be recorded in any namespace ("default" on most clusters): they are
    searched in all namespaces.
    """
    selector = f"involvedObject.kind={ref.kind},involvedObject.name={ref.name}"
    if ref.namespace:
        selector += f",involvedObject.namespace={ref.namespace}"
    events = kube.list("v1", "Event", namespace=ref.namespace, field_selector=selector)
    return sorted(events, key=event_time)


def events_in(kube: Kube, namespace: str | None) -> list[dict[str, Any]]:
    """All events of a namespace (all namespaces when None), oldest first."""
    return sorted(kube.list("v1", "Event", namespace=namespace), key=event_time)


def event_time(event: dict[str, Any]) -> str:
    return str(
        event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp") or ""
    )


def format_event(event: dict[str, Any]) -> str:
    """`TIME TYPE REASON (KIND NAME): MESSAGE` on one line."""
    involved = event.get("involvedObject") or {}
    return (
        f"{event_time(event)} {event.get('type', '')} {event.get('reason', '')} "
        f"({involved.get('kind', '')} {involved.get('name', '')}): {(event.get('message') or '').strip()}"
    )


def pod_logs(
    kube: Kube, namespace: str, pod: str, *, container: str | None = None, tail_lines: int | None = None,
    previous: bool = False,
) -> str:
    """The log of a pod's container (the first one when `container` is None), without URL, Bearer and Authorization
    credentials (logs are written to artifacts); free text, so nothing is guessed from names (redact_text)."""
    query: dict[str, Any] = {"container": container, "tailLines": tail_lines}
    if previous:
        query["previous"] = "true"
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}/log"
    try:
        text = kube.request("GET", path, query=query, raw=True, what=f"logs of pod {namespace}/{pod}")
        return redact_text(text if isinstance(text, str) else str(text))
    except KubeError as exc:
        if exc.status == 404:
            return ""
        raise
