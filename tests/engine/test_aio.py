"""topsail.run_coroutine: Ctrl-C while a coroutine runs is a KeyboardInterrupt (pytest then stops the run), never a
CancelledError that fails one item and lets the run go on."""

from __future__ import annotations

import subprocess
import sys

import pytest

INTERRUPTED = """
import asyncio, os, signal, threading, time
import pytest_topsail as topsail

cancelled = []

async def work():
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        cancelled.append(True)
        raise

runner = asyncio.Runner() if {kept} else None
threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
began = time.monotonic()
try:
    topsail.run_coroutine(work(), runner)
except KeyboardInterrupt:
    if runner is not None:
        runner.close()
    print("KeyboardInterrupt", round(time.monotonic() - began, 1), "cancelled" if cancelled else "not cancelled")
"""


@pytest.mark.parametrize("kept", [False, True], ids=["own-loop", "kept-runner"])
def test_ctrl_c_during_a_coroutine_is_a_keyboard_interrupt_and_the_work_is_cancelled(kept: bool) -> None:
    result = subprocess.run([sys.executable, "-c", INTERRUPTED.format(kept=kept)], capture_output=True, text=True,
                            timeout=120)
    words = result.stdout.split()
    assert words[:1] == ["KeyboardInterrupt"] and words[2:] == ["cancelled"], result.stdout + result.stderr
    assert float(words[1]) < 20  # at the signal, not when the 30 s sleep ends


def test_the_result_comes_back() -> None:
    import asyncio

    import pytest_topsail as topsail

    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    with asyncio.Runner() as runner:
        assert topsail.run_coroutine(answer(), runner) == topsail.run_coroutine(answer(), runner) == 42
    assert topsail.run_coroutine(answer()) == 42
