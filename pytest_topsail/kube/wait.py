"""Waiting for objects with a timeout and progress reports.

Every wait names what it waits for; on timeout it raises `WaitTimeout` naming the object, its last conditions
and its last events. Transient API errors while polling are retried until the deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pytest_topsail import waiting
from pytest_topsail.conditions import condition_status
from pytest_topsail.kube.client import Kube, KubeConnectionError, KubeError, ObjectRef, WatchStop
from pytest_topsail.kube.events import events_for, format_event
from pytest_topsail.waiting import DEFAULT_INTERVAL, Deadline, Progress

T = TypeVar("T")
CONDITIONS_SHOWN = 5
RECHECK_S = 2.0  # delete_and_wait asks again this often for an object whose deletion has not started


class WaitTimeout(KubeError, waiting.WaitTimeout):
    """A wait ran out of time. The message names the object, what was awaited and its last state."""


def poll(
    fetch: Callable[[], T],
    done: Callable[[T], bool],
    *,
    what: str,
    timeout: float,
    progress: Progress | None = None,
    describe: Callable[[T | None], str] | None = None,
    interval: float = DEFAULT_INTERVAL,
    progress_every: float = waiting.PROGRESS_EVERY,
) -> T:
    """`pytest_topsail.waiting.poll` for the cluster: API errors (KubeError) are transient, kept in the message
    and retried until the deadline; the timeout is this module's WaitTimeout (a KubeError)."""
    return waiting.poll(fetch, done, what=what, timeout=timeout, progress=progress, describe=describe,
                        interval=interval, progress_every=progress_every, transient=(KubeError,), error=WaitTimeout)


def wait_for(
    kube: Kube,
    ref: ObjectRef,
    ready: Callable[[dict[str, Any] | None], bool],
    *,
    what: str,
    timeout: float,
    progress: Progress | None = None,
    interval: float = DEFAULT_INTERVAL,
) -> dict[str, Any] | None:
    """Poll `ref` until `ready(obj)` (obj is None while it does not exist). `what` reads like "to be Ready"."""
    return poll(
        lambda: kube.get(ref),
        ready,
        what=f"{ref} {what}",
        timeout=timeout,
        progress=progress,
        describe=lambda obj: describe_state(kube, ref, obj),
        interval=interval,
    )


def wait_condition(
    kube: Kube,
    ref: ObjectRef,
    condition: str,
    status: str = "True",
    *,
    timeout: float,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Wait until `status.conditions` holds `condition` with `status`."""
    obj = wait_for(
        kube, ref, lambda o: condition_status(o, condition) == status,
        what=f"to have condition {condition}={status}", timeout=timeout, progress=progress,
    )
    assert obj is not None
    return obj


def wait_phase(
    kube: Kube, ref: ObjectRef, phase: str, *, timeout: float, progress: Progress | None = None
) -> dict[str, Any]:
    """Wait until `status.phase` equals `phase` (e.g. a ClusterServiceVersion reaching Succeeded)."""
    obj = wait_for(
        kube, ref, lambda o: o is not None and (o.get("status") or {}).get("phase") == phase,
        what=f"to reach phase {phase}", timeout=timeout, progress=progress,
    )
    assert obj is not None
    return obj


def wait_deleted(kube: Kube, ref: ObjectRef, *, timeout: float, progress: Progress | None = None) -> None:
    wait_for(kube, ref, lambda o: o is None, what="to be deleted", timeout=timeout, progress=progress)


class DeleteTimeout(WaitTimeout):
    """Objects deleted by `delete_and_wait` still there at its timeout; `left` names them."""

    def __init__(self, message: str, left: list[ObjectRef]) -> None:
        super().__init__(message)
        self.left = left


def delete_and_wait(kube: Kube, refs: ObjectRef | Sequence[ObjectRef], *, timeout: float,
                    progress: Progress | None = None, propagation: str = "Background",
                    recheck: float = RECHECK_S) -> list[ObjectRef]:
    """Delete `refs` (asked in the given order) and follow them by watch until every one is gone; returns those
    that existed. The one delete-and-wait of the package.

    An object whose deletion has not started (its delete was refused even after the layer's retries) is asked
    again every `recheck` seconds, so one lost request never leaves it behind. A cluster that stops answering ends
    the wait at once (KubeConnectionError). On timeout: DeleteTimeout (a WaitTimeout) naming those left and the
    state of the first, with `left`."""
    wanted = [refs] if isinstance(refs, ObjectRef) else list(refs)
    what = f"{_names(wanted)} to be deleted"
    deadline = Deadline(timeout, what)
    existed, remaining, last_error = [], [], None
    for ref in wanted:
        try:
            if kube.delete(ref, propagation=propagation):
                existed.append(ref)
                remaining.append(ref)
        except KubeConnectionError:
            raise
        except KubeError as exc:  # unknown for now: asked again
            remaining.append(ref)
            last_error = exc
    if remaining:
        _report(progress, f"waiting for {what} (timeout {timeout:.0f}s)")
    while remaining:
        try:
            remaining = _watch_gone(kube, remaining, min(deadline.left(), recheck))
            remaining = [ref for ref in remaining if _still_there(kube, ref, propagation)]
        except KubeConnectionError:
            raise
        except KubeError as exc:  # a list or get was refused: checked again
            last_error = exc
            deadline.sleep(0.2)
        if remaining and deadline.expired():
            obj = _get_or_none(kube, remaining[0])
            details = f"still there: {_names(remaining)}; {describe_state(kube, remaining[0], obj)}"
            if last_error is not None:
                details += f"; last error: {last_error}"
            raise DeleteTimeout(str(deadline.timeout_error(details)), remaining)
    if existed:
        _report(progress, f"{what}: done after {deadline.elapsed():.1f}s")
    return existed


def _names(refs: Sequence[ObjectRef]) -> str:
    return ", ".join(map(str, refs))


def _get_or_none(kube: Kube, ref: ObjectRef) -> dict[str, Any] | None:
    try:
        return kube.get(ref)
    except KubeError:
        return None


def _still_there(kube: Kube, ref: ObjectRef, propagation: str) -> bool:
    """Ask for the deletion of `ref` again unless it is under way; False once it is gone."""
    obj = kube.get(ref)
    if obj is None:
        return False
    if not (obj.get("metadata") or {}).get("deletionTimestamp"):
        kube.delete(ref, propagation=propagation)
    return True


def _watch_gone(kube: Kube, refs: list[ObjectRef], timeout: float) -> list[ObjectRef]:
    """Watch the kind (and namespace) of the first of `refs` for up to `timeout` seconds; `refs` less those of that
    kind seen gone (absent from the first list or deleted since)."""
    first = refs[0]
    group = [ref for ref in refs if (ref.api_version, ref.kind, ref.namespace) == (first.api_version, first.kind,
                                                                                   first.namespace)]
    waiting = {ref.name for ref in group}
    present: set[str] = set()
    listed = False
    stop = WatchStop()

    def on_listed() -> None:
        nonlocal listed
        listed = True
        waiting.intersection_update(present)
        if not waiting:
            stop.set()  # all gone already: the watch request that follows returns at once

    selector = f"metadata.name={first.name}" if len(group) == 1 else None
    for event_type, obj in kube.watch(first.api_version, first.kind, namespace=first.namespace,
                                      field_selector=selector, timeout=timeout, stop=stop, on_listed=on_listed):
        name = (obj.get("metadata") or {}).get("name", "")
        if not listed:
            present.add(name)
            continue
        if event_type == "DELETED":
            waiting.discard(name)
        if not waiting:
            break
    return [ref for ref in refs if ref not in group or ref.name in waiting]


def describe_state(kube: Kube, ref: ObjectRef, obj: dict[str, Any] | None, events: int = 5) -> str:
    """One line about the object's state: existence, phase, conditions, last events."""
    if obj is None:
        parts = [f"{ref} does not exist"]
    else:
        status = obj.get("status") or {}
        parts = []
        for key in ("phase", "state", "message", "reason"):
            if isinstance(status.get(key), str) and status.get(key):
                parts.append(f"{key}={status[key]}")
        conditions = [format_condition(c) for c in (status.get("conditions") or [])[-CONDITIONS_SHOWN:]]
        parts.append("last conditions: " + ("; ".join(conditions) if conditions else "none"))
    try:
        recent = events_for(kube, ref)[-events:]
    except KubeError as exc:
        parts.append(f"events unavailable: {exc}")
    else:
        parts.append("last events: " + (" | ".join(format_event(e) for e in recent) if recent else "none"))
    return ", ".join(parts)


def format_condition(condition: dict[str, Any]) -> str:
    """`Type=Status (Reason: message)`; OLM's CSV conditions have a phase instead of a type and status."""
    if condition.get("type") is not None:
        head = f"{condition.get('type')}={condition.get('status')}"
    else:
        head = f"phase={condition.get('phase')}"
    reason, message = condition.get("reason"), condition.get("message")
    if message:
        return f"{head} ({reason}: {message})" if reason else f"{head} ({message})"
    return f"{head} ({reason})" if reason else head


def _report(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)
