"""What each xdist role adds to a run (the role itself: ``pytest_topsail.xdist_role``), registered by
``pytest_topsail.plugin``:

- the controller ships its run id and artifacts root to every worker it starts (``workerinput``), so every process
  of a run writes to one tree;
- with suites in scope, ``-n N`` keeps the ``xdist_group`` marks (``--dist loadgroup``) unless ``--dist`` was given;
- a worker carries an item's ``@group`` suffix over to pytest >= 9.2's structured node id (pytest-xdist <= 3.8,
  its issue 1386): pytest-xdist's worker appends it to ``item._nodeid``, which pytest 9.2 no longer reads, so every
  group would be spread over all workers (a TGIS worker deployed by each process).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_topsail.xdist_role import ARTIFACTS_INPUT, RUN_ID_INPUT, role_of


def pytest_configure(config: pytest.Config) -> None:
    role = role_of(config)
    if role.is_worker:
        config.pluginmanager.register(WorkerGroups(), "topsail-xdist-worker")
    elif config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(ControllerInput(config), "topsail-xdist-controller")


def keep_groups(config: pytest.Config) -> None:
    """``-n N`` alone distributes with ``--dist load``, which ignores ``xdist_group`` marks; with suites, the groups
    are kept (``loadgroup``: a TGIS worker's or an LLM sweep's items on one process) unless ``--dist`` was given."""
    import os

    given = [*config.invocation_params.args, *os.environ.get("PYTEST_ADDOPTS", "").split(), *config.getini("addopts")]
    if any(str(arg).startswith("--dist") for arg in given):
        return
    if role_of(config).is_worker:
        config.option.loadgroup = True  # a worker re-reads the command line: it marks each item with its group
    elif getattr(config.option, "dist", None) == "load":
        config.option.dist = "loadgroup"


class ControllerInput:
    """On the controller (and pytest alone with xdist installed): what each worker starts with."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_configure_node(self, node: Any) -> None:
        from pytest_topsail.run import state_of

        state = state_of(self.config)
        node.workerinput[ARTIFACTS_INPUT] = str(state.artifacts_root)
        node.workerinput[RUN_ID_INPUT] = state.run_id


class WorkerGroups:
    """On a worker, after pytest-xdist's own hook: each item's ``@group`` suffix kept in its structured id."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            legacy = item.__dict__.get("_nodeid")
            structured = getattr(item, "_id", None)  # a slot on pytest >= 9.2
            if legacy and structured is not None and str(structured) != legacy:
                object.__setattr__(item, "_id", type(structured).parse(legacy))  # typed on pytest >= 9.2 only
