"""The one progress stream for long waits (cluster start, operator installs, job submission, sampling).

Every line goes to a ``progress.log`` (the given file, else the current artifact directory's) with a time stamp.
On the controller or a single process it is also shown on the terminal past pytest's output capture; xdist workers
only log (their terminal output would interleave). Repeated lines that differ only in their numbers ("submitted
10/50 jobs", "submitted 20/50 jobs") are shown at most every ``repeat_interval_s``; the last one held back is shown
before the next different line, so the terminal always ends on the final figures.

Use it as a callable (``progress("step done")``) or as a text stream (``progress.write("line\\n")``).
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.xdist_role import role_of

_NUMBERS = re.compile(r"\d+(\.\d+)?")
_SEEN_WIDTH = pytest.StashKey[int]()  # width of pytest's terminal line when the last progress line was printed


class Progress:
    """Progress lines: ``progress.log`` always, the terminal when enabled on the controller or a single process."""

    def __init__(self, config: Any | None = None, *, log: Path | None = None, enabled: bool = True,
                 prefix: str = "[topsail]", repeat_interval_s: float = 2.0, terminal: TextIO | None = None) -> None:
        self.config = config
        self.log_path = log
        self.prefix = prefix
        self.repeat_interval_s = repeat_interval_s
        self.on_terminal = enabled and not role_of(config).is_worker
        self.terminal = terminal
        self.lock = threading.Lock()
        self.partial_lock = threading.Lock()
        self.partial = ""
        self.last_shape = ""
        self.last_shown_at = 0.0
        self.held_back: str | None = None
        self.started = False

    def __call__(self, message: str) -> None:
        with self.lock:
            self._log(message)
            if self.on_terminal:
                self._show(message)

    def write(self, text: str) -> int:
        """Text-stream form: complete lines are progress lines; a partial line waits for its end."""
        with self.partial_lock:
            lines = (self.partial + text).split("\n")
            self.partial = lines.pop()
        for line in lines:
            if line.strip():
                self(line)
        return len(text)

    def flush(self) -> None:
        with self.lock:
            if self.held_back is not None:
                self._print(self.held_back)
                self.held_back = None

    def close(self) -> None:
        if self.partial.strip():
            self(self.partial)
        self.partial = ""
        self.flush()

    def _log(self, message: str) -> None:
        path = self.log_path
        if path is None:
            from pytest_topsail.artifacts import current_artifact_dir

            with contextlib.suppress(TopsailError):
                path = current_artifact_dir() / "progress.log"
        if path is None:
            return
        with contextlib.suppress(OSError), path.open("a", encoding="utf-8") as log:
            log.write(f"{time.strftime('%H:%M:%S')} {message}\n")

    def _show(self, message: str) -> None:
        line = f"{self.prefix} {message}" if self.prefix else message
        shape = _NUMBERS.sub("#", line)
        now = time.monotonic()
        if shape == self.last_shape and now - self.last_shown_at < self.repeat_interval_s:
            self.held_back = line
            return
        if self.held_back is not None and shape != self.last_shape:
            self._print(self.held_back)
        self.held_back = None
        self.last_shape, self.last_shown_at = shape, now
        self._print(line)

    def _print(self, line: str) -> None:
        text = line + "\n"
        if self._glued():  # pytest wrote on its current line ("file.py ..", "[100%]"): start below it
            text = "\n" + text
        self.started = True
        capture = self.config.pluginmanager.getplugin("capturemanager") if self.config is not None else None
        stream = self.terminal or sys.stderr
        if capture is None:
            stream.write(text)
            stream.flush()
            return
        with capture.global_and_fixture_disabled():
            stream = self.terminal or sys.stderr
            stream.write(text)
            stream.flush()


    def _glued(self) -> bool:
        """Whether pytest's terminal line holds text written since our last line (ours go to another stream, so
        pytest's writer still counts its own line after we print)."""
        config, writer = self.config, None
        with contextlib.suppress(AttributeError, AssertionError):
            writer = config.get_terminal_writer() if config is not None else None
        if config is None or writer is None:
            return not self.started
        seen = config.stash.get(_SEEN_WIDTH, None)  # shared by every Progress of the session
        width = writer.width_of_current_line
        config.stash[_SEEN_WIDTH] = width
        return width > 0 and width != seen

