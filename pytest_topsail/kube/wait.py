"""Waiting for objects with a timeout and progress reports.

Every wait names what it waits for; on timeout it raises `WaitTimeout` naming the object, its last conditions
and its last events. Transient API errors while polling are retried until the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from pytest_topsail.conditions import condition_status
from pytest_topsail.kube.client import Kube, KubeError, ObjectRef
from pytest_topsail.kube.events import events_for, format_event

T = TypeVar("T")
Progress = Callable[[str], None]
DEFAULT_INTERVAL = 0.25
FIRST_INTERVAL = 0.05  # polls start this often and back off (x1.5) to `interval`: short waits end soon after the fact
PROGRESS_EVERY = 5.0
CONDITIONS_SHOWN = 5


class WaitTimeout(KubeError):
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
    progress_every: float = PROGRESS_EVERY,
) -> T:
    """Call `fetch` until `done(value)`; return the value. On timeout raise WaitTimeout with `describe(last)`.
    Polls come every `FIRST_INTERVAL` at first, then less often, at least every `interval`."""
    start = time.monotonic()
    pause = min(FIRST_INTERVAL, interval)
    deadline = start + timeout
    last: T | None = None
    last_error: KubeError | None = None
    next_report = start + progress_every
    _report(progress, f"waiting for {what} (timeout {timeout:.0f}s)")
    while True:
        try:
            last = fetch()
            last_error = None
            if done(last):
                _report(progress, f"{what}: done after {time.monotonic() - start:.1f}s")
                return last
        except WaitTimeout:
            raise
        except KubeError as exc:  # transient: keep polling until the deadline
            last_error = exc
        now = time.monotonic()
        if now >= deadline:
            break
        if now >= next_report:
            _report(progress, f"waiting for {what}: {now - start:.0f}s / {timeout:.0f}s")
            next_report = now + progress_every
        time.sleep(min(pause, max(0.0, deadline - now)))
        pause = min(pause * 1.5, interval)
    details = describe(last) if describe else ""
    if last_error is not None:
        details = f"{details}; last error: {last_error}" if details else f"last error: {last_error}"
    message = f"timed out after {timeout:g}s waiting for {what}"
    raise WaitTimeout(f"{message}; {details}" if details else message)


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


def delete_and_wait(kube: Kube, ref: ObjectRef, *, timeout: float, progress: Progress | None = None) -> bool:
    """Delete `ref` and wait until it is gone; True when it existed."""
    existed = kube.delete(ref)
    if existed:
        wait_deleted(kube, ref, timeout=timeout, progress=progress)
    return existed



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
