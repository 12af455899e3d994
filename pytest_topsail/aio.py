"""A coroutine run to its end from synchronous code (a test item, a fixture), with Ctrl-C always a KeyboardInterrupt.

``asyncio.Runner.run`` (and so ``asyncio.run``; Python 3.11 to 3.13) turns SIGINT into a cancellation of its task
and, once the task has ended, into KeyboardInterrupt. But it installs that handler before it resets its count of
interrupts: a SIGINT handled in between cancels the task and comes out as a bare CancelledError. pytest then failed
the one item running and went on with the next ones instead of stopping the run (a Ctrl-C test of the TGIS suite at
load ~11). Here the loop runs with Python's own SIGINT handler, so Ctrl-C raises KeyboardInterrupt wherever the loop
is, as ``loop.run_until_complete`` always did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_coroutine(work: Coroutine[Any, Any, T], runner: asyncio.Runner | None = None) -> T:
    """``work`` run to its end on ``runner``'s event loop (one kept for many calls, e.g. to reuse a gRPC channel),
    or on a new one closed afterwards, as ``asyncio.run`` does. On KeyboardInterrupt its task is cancelled; the
    runner's close awaits what is left of it."""
    if runner is None:
        with asyncio.Runner() as own:
            return run_coroutine(work, own)
    loop = runner.get_loop()
    task = loop.create_task(work)
    try:
        return loop.run_until_complete(task)
    except KeyboardInterrupt:
        task.cancel()
        raise
