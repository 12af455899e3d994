"""The one wait helper (pytest_topsail/waiting.py) on a virtual clock: what a caller sees when a wait ends, times
out, meets a transient error or reports progress."""

from __future__ import annotations

import pytest

from pytest_topsail.waiting import Deadline, Every, WaitTimeout, poll


class Clock:
    """A virtual clock whose sleeps advance it (and are recorded)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


def test_poll_returns_the_value_once_done_polling_ever_less_often_up_to_the_interval() -> None:
    clock = Clock()
    values = iter(range(10))
    assert poll(lambda: next(values), lambda v: v == 6, what="six", timeout=30, interval=0.25, clock=clock,
                sleep=clock.sleep) == 6
    assert clock.sleeps == [0.05, 0.075, 0.1125, 0.16875, 0.25, 0.25]


def test_a_timeout_names_what_was_awaited_its_last_state_and_the_last_transient_error() -> None:
    clock = Clock()
    values = iter([1, 2])

    def fetch() -> int:
        value = next(values, None)
        if value is None:
            raise OSError("connection reset")
        return value

    with pytest.raises(WaitTimeout) as error:
        poll(fetch, lambda v: v > 5, what="the counter to pass 5", timeout=2, transient=(OSError,),
             describe=lambda last: f"last value {last}", clock=clock, sleep=clock.sleep)
    assert str(error.value) == ("timed out after 2s waiting for the counter to pass 5; last value 2; "
                                "last error: connection reset")
    assert clock.now == pytest.approx(102.0)  # never sleeps past the deadline


def test_an_error_that_is_not_transient_ends_the_wait_at_once() -> None:
    clock = Clock()

    def fetch() -> int:
        raise ValueError("no such thing")

    with pytest.raises(ValueError, match="no such thing"):
        poll(fetch, bool, what="x", timeout=60, transient=(OSError,), clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []


def test_progress_lines_at_the_start_every_period_and_at_the_end() -> None:
    clock = Clock()
    lines: list[str] = []
    poll(clock, lambda now: now >= 112, what="noon", timeout=30, progress=lines.append, progress_every=5,
         interval=1, clock=clock, sleep=clock.sleep)
    assert lines[0] == "waiting for noon (timeout 30s)" and lines[-1].startswith("noon: done after 12.")
    assert lines[1:-1] == ["waiting for noon: 5s / 30s", "waiting for noon: 10s / 30s"]


def test_deadline_and_every_for_loops_driven_by_events() -> None:
    clock = Clock()
    deadline, check = Deadline(10, "the jobs to end", clock=clock), Every(3, clock=clock)
    assert (deadline.left(), deadline.expired(), check.due(), check.left()) == (10, False, False, 3)
    clock.now += 3
    assert check.due() and not check.due() and check.left() == 3
    deadline.sleep(60, clock.sleep)  # never past the deadline
    assert deadline.expired() and deadline.elapsed() == 10 and deadline.left() == 0
    message = str(deadline.timeout_error("3 of 5 ended"))
    assert message == "timed out after 10s waiting for the jobs to end; 3 of 5 ended"
    assert Deadline.until(clock() + 4, clock=clock).left() == 4
    never = Deadline.until(None, clock=clock)
    clock.now += 1e9
    assert not never.expired() and never.timeout is None
