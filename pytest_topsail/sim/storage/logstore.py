"""Containers' output in the store, per run as the kubelet keeps it (the current run and the previous one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

LOG_LIMIT = 1 << 20  # bytes kept per container run
PodKey = tuple[str, str]  # (namespace, pod)


@dataclass
class LogRun:
    """The output of one run of a container: (epoch seconds, line with its newline); ``dropped`` counts the lines
    removed from the front to keep the run under the size limit (positions stay stable for followers)."""

    lines: list[tuple[float, str]] = field(default_factory=list)
    dropped: int = 0
    size: int = 0

    def add(self, when: float, text: str) -> None:
        for line in text.splitlines(keepends=True):
            self.lines.append((when, line))
            self.size += len(line)
        while self.size > LOG_LIMIT and self.lines:
            self.size -= len(self.lines.pop(0)[1])
            self.dropped += 1

    @property
    def end(self) -> int:
        """The position after the last line written so far."""
        return self.dropped + len(self.lines)

    def since(self, position: int) -> list[tuple[float, str]]:
        return self.lines[max(0, position - self.dropped):]


class PodLogs:
    """Runs of every container of every pod, stamped with `clock`."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._runs: dict[PodKey, dict[str, list[LogRun]]] = {}

    def start_run(self, namespace: str, pod: str, container: str) -> None:
        runs = self._runs.setdefault((namespace, pod), {}).setdefault(container, [])
        runs.append(LogRun())
        del runs[:-2]

    def append(self, namespace: str, pod: str, container: str, text: str) -> None:
        runs = self._runs.setdefault((namespace, pod), {}).setdefault(container, [])
        if not runs:
            runs.append(LogRun())
        runs[-1].add(self._clock(), text)

    def run(self, namespace: str, pod: str, container: str, previous: bool = False) -> LogRun | None:
        runs = self._runs.get((namespace, pod), {}).get(container, [])
        wanted = -2 if previous else -1
        return runs[wanted] if len(runs) >= -wanted else None

    def forget(self, namespace: str, pod: str) -> None:
        """The pod is gone: its logs too."""
        self._runs.pop((namespace, pod), None)
