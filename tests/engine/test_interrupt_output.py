"""Ctrl-C output: pytest shows the interrupt's last line (its full traceback with --full-trace); the engine cuts the
traceback before pytest formats it (pytest_topsail/plugin.py ShortInterrupt) and the user sees the same lines."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

INTERRUPTED = """
def deep(depth, payload):
    if depth == 0:
        raise KeyboardInterrupt  # the interrupt's line
    return deep(depth - 1, payload)


def test_interrupted():
    deep(30, list(range(1000)))
"""


@pytest.mark.parametrize("full_trace", [False, True], ids=["default", "full-trace"])
def test_ctrl_c_shows_the_interrupt_line_and_the_whole_traceback_on_request(pytester: pytest.Pytester,
                                                                           full_trace: bool) -> None:
    pytester.makepyfile(test_interrupt=INTERRUPTED)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider",
                                           *(["--full-trace"] if full_trace else []))
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    if full_trace:  # every frame, the test's and the recursion's
        result.stdout.fnmatch_lines(["*def test_interrupted():*", "*return deep(depth - 1, payload)*",
                                     "*raise KeyboardInterrupt  # the interrupt's line*"])
    else:
        line = next(number for number, text in enumerate(INTERRUPTED.strip("\n").splitlines(), 1) if "raise" in text)
        result.stdout.fnmatch_lines(["*! KeyboardInterrupt !*", f"*test_interrupt.py:{line}: KeyboardInterrupt",
                                     "(to show a full traceback on KeyboardInterrupt use --full-trace)"])
        assert "return deep(depth - 1, payload)" not in result.stdout.str()
