"""Parallel steps: callables run in threads, each in its own ``NNN__`` directory under ``NNN__<name>/``.

Unlike TOPSAIL's ``run.Parallel`` nothing is killed on failure: every step runs to its end, every exception is
collected and raised together (:class:`ParallelError`, an ``ExceptionGroup``). The suite configuration is frozen while
the steps run, so no step can change what another reads.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from pytest_topsail.artifacts import next_artifact_dir, safe_name, using_artifact_dir, write_failure
from pytest_topsail.config import Config, current_config


class ParallelError(ExceptionGroup):
    """All the exceptions raised by the steps of one Parallel region."""


class StepAborted(Exception):
    """A step ended by a BaseException that is no Exception (``pytest.fail``/``pytest.skip`` in a step, ...)."""


@dataclass
class _Task:
    name: str
    func: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    result: Any = None
    error: BaseException | None = None
    directory: Path | None = None


@dataclass
class Parallel:
    """``with Parallel("prepare") as p: p.delayed(fn, *args)`` — runs everything on exit of the block.

    ``config`` (default: the running item's suite configuration) is frozen while the steps run; ``parent`` (default:
    the current artifact directory) receives the ``NNN__<name>/`` directory.
    """

    name: str
    config: Config | None = None
    parent: Path | None = None
    timeout: float | None = None
    tasks: list[_Task] = field(default_factory=list)
    directory: Path | None = None

    def delayed(self, func: Callable[..., Any], *args: Any, name: str | None = None, **kwargs: Any) -> None:
        """Schedule ``func(*args, **kwargs)``; ``name`` names its directory (default: the function's name)."""
        step_name = name or getattr(func, "__name__", "step")
        self.tasks.append(_Task(safe_name(str(step_name)), func, args, kwargs))

    def __enter__(self) -> Parallel:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None:
            return  # the block itself failed: run nothing, let its exception through
        self.run()

    def run(self) -> list[Any]:
        """Run the scheduled steps now; return their results in scheduling order."""
        self.directory = next_artifact_dir(self.name, self.parent)
        for task in self.tasks:
            task.directory = next_artifact_dir(task.name, self.directory)
        config = self.config if self.config is not None else current_config()
        if config is not None:
            config.freeze()
        try:
            threads = [self._start(task) for task in self.tasks]
            for thread in threads:
                thread.join(self.timeout)
        finally:
            if config is not None:
                config.unfreeze()
        stuck = [task.name for task, thread in zip(self.tasks, threads, strict=True) if thread.is_alive()]
        if stuck:
            raise TimeoutError(f"Parallel {self.name!r}: steps still running after {self.timeout}s: {', '.join(stuck)}")
        failed = [task for task in self.tasks if task.error is not None]
        if failed:
            interrupt = next((task.error for task in failed if isinstance(task.error, KeyboardInterrupt | SystemExit)),
                             None)
            if interrupt is not None:
                raise interrupt
            names = ", ".join(task.name for task in failed)
            group = ParallelError(f"Parallel {self.name!r}: {len(failed)} of {len(self.tasks)} steps failed: {names}",
                                  [_as_exception(task) for task in failed])
            write_failure(self.directory, group)
            raise group
        return [task.result for task in self.tasks]

    def _start(self, task: _Task) -> threading.Thread:
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(self._run_task, task),
                                  name=f"topsail-{self.name}-{task.name}", daemon=True)
        thread.start()
        return thread

    @staticmethod
    def _run_task(task: _Task) -> None:
        assert task.directory is not None
        with using_artifact_dir(task.directory):
            try:
                task.result = task.func(*task.args, **task.kwargs)
            except BaseException as exc:  # noqa: BLE001 - every step's failure is collected and reported
                task.error = exc
                write_failure(task.directory, exc)


def _as_exception(task: _Task) -> Exception:
    error = task.error
    if isinstance(error, Exception):
        return error
    wrapped = StepAborted(f"step {task.name!r}: {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped
