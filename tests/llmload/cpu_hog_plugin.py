"""A pytest plugin for tests/llmload/test_validity_audit.py: a CPU hog beside the load client of every item whose id
holds ``starved``: a thread spinning in Python, which holds the GIL for the whole switch interval (raised to
HOG_SWITCH_S) each time it gets it, so the client's event loop wakes up late and its process burns a core."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

HOG_SWITCH_S = 0.2


def spin(stop: threading.Event) -> None:
    count = 0
    while not stop.is_set():
        count += 1


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    if "starved" not in item.nodeid:
        return (yield)
    stop, interval = threading.Event(), sys.getswitchinterval()
    hog = threading.Thread(target=spin, args=(stop,), daemon=True)
    sys.setswitchinterval(HOG_SWITCH_S)
    hog.start()
    try:
        return (yield)
    finally:
        stop.set()
        hog.join(10)
        sys.setswitchinterval(interval)
