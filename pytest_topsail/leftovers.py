"""Objects a test could not remove from the cluster: reported loudly at the end of the run, with the command that
removes each, and the session fails.

A test (or library code it calls, such as the scale runner's cleanup) calls :func:`report_leftover` once it has
verified that something it created is still there. The entry goes into the running item's record, which reaches the
xdist controller with the item's report; the controller lists every entry in a ``LEFT ON THE CLUSTER`` section of the
terminal summary and makes the exit status non-zero.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

_current: contextvars.ContextVar[list[dict[str, str]] | None] = contextvars.ContextVar("topsail_leftovers",
                                                                                       default=None)


def report_leftover(what: str, command: str) -> None:
    """Record that ``what`` (e.g. ``namespace scale-1a2b3c-0``) is still on the cluster; ``command`` removes it.

    Outside a suite item (no record to carry it), the entry is raised as a warning instead."""
    entries = _current.get()
    if entries is None:
        import warnings

        warnings.warn(pytest.PytestWarning(f"topsail: left on the cluster: {what}; remove it with: {command}"),
                      stacklevel=2)
        return
    entries.append({"what": what, "command": command})


@contextmanager
def collecting(entries: list[dict[str, str]]) -> Iterator[None]:
    """Around one item: :func:`report_leftover` adds to ``entries`` (its record's ``leftovers``)."""
    token = _current.set(entries)
    try:
        yield
    finally:
        _current.reset(token)


class LeftoverReport:
    """Registered on the controller (or single process): gathers the entries of every item, reports them at the end."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, dict[str, str]]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = getattr(report, "topsail", None)
        if report.when == "teardown" and record is not None:
            self.entries.extend((report.nodeid, entry) for entry in record.leftovers)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.entries and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.entries:
            return
        terminalreporter.write_sep("=", f"LEFT ON THE CLUSTER: {len(self.entries)} object(s)", red=True, bold=True)
        for nodeid, entry in self.entries:
            terminalreporter.write_line(f"{entry['what']} (left by {nodeid})", red=True)
            terminalreporter.write_line(f"    remove it with: {entry['command']}")
