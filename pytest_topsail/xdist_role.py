"""The xdist role of this pytest process, computed once per run and kept in ``config.stash``: the one place that
reads pytest-xdist's ``config.workerinput`` and ``-n``.

- a **worker** (``is_worker``): started by an xdist controller, it collects and runs items; ``worker_id`` is its
  name (``gw0``) and ``workerinput`` what its controller shipped to it (the run id and artifacts root).
- a **controller** (``is_controller``): ``-n N`` with N > 0; it starts the workers, collects nothing itself and
  receives their reports.
- neither: pytest alone (no xdist, or ``-n 0``); it runs the items.

``runs_tests`` is true for a worker and for pytest alone: the processes whose fixtures build things.
The hooks each role adds to the run are in ``pytest_topsail.xdist_hooks``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass(frozen=True)
class Role:
    """What this process is in an xdist run (see the module docstring)."""

    worker_id: str | None = None  # "gw0" on a worker
    workerinput: Mapping[str, Any] = field(default_factory=dict)  # what the controller shipped (a worker only)
    controller: bool = False  # -n N > 0 and not a worker

    @property
    def is_worker(self) -> bool:
        return self.worker_id is not None

    @property
    def is_controller(self) -> bool:
        return self.controller

    @property
    def runs_tests(self) -> bool:
        """A worker, or pytest without xdist workers: the process whose items and fixtures run."""
        return not self.controller

    @property
    def name(self) -> str:
        """How the process is named in messages: ``xdist worker gw0``, ``the xdist controller``, ``the pytest
        process``."""
        if self.worker_id is not None:
            return f"xdist worker {self.worker_id}"
        return "the xdist controller" if self.controller else "the pytest process"


ARTIFACTS_INPUT = "topsail_artifacts"  # the workerinput keys the controller ships (pytest_topsail.xdist_hooks)
RUN_ID_INPUT = "topsail_run_id"
SINGLE = Role()  # pytest alone: also the role of code that runs without a pytest config
ROLE_KEY = pytest.StashKey[Role]()


def role_of(config: Any) -> Role:
    """The role of the process `config` (a pytest config; ``None`` gives the single-process role), computed on first
    use, after the command line is parsed (xdist has resolved ``-n auto`` by ``pytest_configure``)."""
    if config is None:
        return SINGLE
    stash = getattr(config, "stash", None)
    if stash is None:  # a stand-in config of a unit test
        return _read_role(config)
    role = stash.get(ROLE_KEY, None)
    if role is None:
        role = stash[ROLE_KEY] = _read_role(config)
    return role


def _read_role(config: Any) -> Role:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return Role(worker_id=str(workerinput.get("workerid", "gw?")), workerinput=dict(workerinput))
    option = getattr(config, "option", None)
    return Role(controller=bool(getattr(option, "numprocesses", None)))
