"""The one mechanism for waiting with a time limit: `poll` (call until done) and `Deadline` (a time limit a loop
driven by something else, such as watch events, keeps).

Interface: ``poll(fetch, done, what=, timeout=)`` calls `fetch` (every 50 ms at first, backing off to `interval`)
until ``done(value)`` and returns that value; errors of the `transient` types are kept and polling goes on. On
timeout it raises `WaitTimeout`: ``timed out after <timeout>s waiting for <what>; <describe(last value)>; last
error: ...``; with `progress`, one line when the wait starts, every `progress_every` seconds and when it ends.
``Deadline(timeout, what)`` (or ``Deadline.until(instant)``) gives ``left()``, ``expired()``, ``elapsed()``,
``sleep(seconds)`` (never past the deadline) and ``timeout_error(details)``, the same message as `poll`'s.
``Every(period)`` says when a periodic check of such a loop is ``due()`` (``left()``: seconds until then). The
Kubernetes flavour (transient API errors, the object's state in the message) is `pytest_topsail.kube.wait.poll`.
Nothing else in the package keeps a deadline of its own (tests/engine/test_one_mechanism.py checks the source).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from pytest_topsail.errors import TopsailError

T = TypeVar("T")
Progress = Callable[[str], None]
Clock = Callable[[], float]
DEFAULT_INTERVAL = 0.25
FIRST_INTERVAL = 0.05  # polls start this often and back off (x1.5) to `interval`: short waits end soon after the fact
PROGRESS_EVERY = 5.0


class WaitTimeout(TopsailError):
    """A wait ran out of time. The message names what was awaited and its last state."""


class Deadline:
    """A time limit of `timeout` seconds from now (on `clock`) for awaiting `what` (a phrase: "Prometheus to
    answer on http://..."); ``timeout=None`` never expires."""

    def __init__(self, timeout: float | None, what: str = "", *, clock: Clock = time.monotonic) -> None:
        self.timeout, self.what, self.clock = timeout, what, clock
        self.start = clock()
        self.at = float("inf") if timeout is None else self.start + timeout

    @classmethod
    def until(cls, instant: float | None, what: str = "", *, clock: Clock = time.monotonic) -> Deadline:
        """The deadline at `instant` of `clock` (None: never)."""
        return cls(None if instant is None else instant - clock(), what, clock=clock)

    def left(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.at - self.clock())

    def expired(self) -> bool:
        return self.clock() >= self.at

    def elapsed(self) -> float:
        return self.clock() - self.start

    def sleep(self, seconds: float, sleep: Callable[[float], object] = time.sleep) -> None:
        """Sleep `seconds`, or until the deadline if that comes first (`sleep` may be an Event's wait)."""
        sleep(min(seconds, self.left()))

    def timeout_error(self, details: str = "", error: type[WaitTimeout] = WaitTimeout) -> WaitTimeout:
        """The error to raise once expired: ``timed out after <timeout>s waiting for <what>; <details>``."""
        message = f"timed out after {self.timeout:g}s waiting for {self.what}"
        return error(f"{message}; {details}" if details else message)


class Every:
    """A periodic check inside a wait: ``due()`` is True once every `period` seconds (first after one period, or
    at once with ``now=True``)."""

    def __init__(self, period: float, *, now: bool = False, clock: Clock = time.monotonic) -> None:
        self.period, self.clock = period, clock
        self.at = clock() + (0.0 if now else period)

    def left(self) -> float:
        """Seconds until the check is due, never negative."""
        return max(0.0, self.at - self.clock())

    def due(self) -> bool:
        now = self.clock()
        if now < self.at:
            return False
        self.at = now + self.period
        return True


def poll(
    fetch: Callable[[], T],
    done: Callable[[T], bool],
    *,
    what: str,
    timeout: float,
    progress: Progress | None = None,
    describe: Callable[[T | None], str] | None = None,
    interval: float = DEFAULT_INTERVAL,
    first_interval: float = FIRST_INTERVAL,
    progress_every: float = PROGRESS_EVERY,
    transient: tuple[type[Exception], ...] = (),
    error: type[WaitTimeout] = WaitTimeout,
    sleep: Callable[[float], object] = time.sleep,
    clock: Clock = time.monotonic,
) -> T:
    """Call `fetch` until `done(value)`; return the value. On timeout raise `error` with `describe(last)` and the
    last transient error. Polls come every `first_interval` at first, then less often, at least every `interval`;
    `sleep` may be an Event's wait, so that a change ends the pause early."""
    deadline = Deadline(timeout, what, clock=clock)
    pause = min(first_interval, interval)
    last: T | None = None
    last_error: Exception | None = None
    report = Every(progress_every, clock=clock)
    _report(progress, f"waiting for {what} (timeout {timeout:.0f}s)")
    while True:
        try:
            last = fetch()
            last_error = None
            if done(last):
                _report(progress, f"{what}: done after {deadline.elapsed():.1f}s")
                return last
        except WaitTimeout:
            raise
        except transient as exc:  # keep polling until the deadline
            last_error = exc
        if deadline.expired():
            break
        if report.due():
            _report(progress, f"waiting for {what}: {deadline.elapsed():.0f}s / {timeout:.0f}s")
        deadline.sleep(pause, sleep)
        pause = min(pause * 1.5, interval)
    details = describe(last) if describe else ""
    if last_error is not None:
        details = f"{details}; last error: {last_error}" if details else f"last error: {last_error}"
    raise deadline.timeout_error(details, error)


def _report(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)
