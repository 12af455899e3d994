"""The xdist role of a process: read once from pytest-xdist's ``workerinput`` and ``-n``, kept in the stash."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_topsail.xdist_role import ROLE_KEY, Role, role_of


def fake_config(numprocesses: object = None, workerinput: dict[str, str] | None = None) -> SimpleNamespace:
    config = SimpleNamespace(stash=pytest.Stash(), option=SimpleNamespace(numprocesses=numprocesses))
    if workerinput is not None:
        config.workerinput = workerinput
    return config


@pytest.mark.parametrize(("numprocesses", "workerinput", "worker", "controller", "runs_tests", "name"), [
    (None, None, False, False, True, "the pytest process"),
    (0, None, False, False, True, "the pytest process"),
    (2, None, False, True, False, "the xdist controller"),
    (2, {"workerid": "gw1", "topsail_run_id": "r"}, True, False, True, "xdist worker gw1"),
])
def test_the_role_of_each_kind_of_process(numprocesses, workerinput, worker, controller, runs_tests, name) -> None:
    role = role_of(fake_config(numprocesses, workerinput))
    assert (role.is_worker, role.is_controller, role.runs_tests, role.name) == (worker, controller, runs_tests, name)
    assert role.workerinput == (workerinput or {})


def test_the_role_is_computed_once_per_config() -> None:
    config = fake_config(2)
    first = role_of(config)
    config.option.numprocesses = 0  # read once: later changes of the options do not move the role
    assert role_of(config) is first and config.stash[ROLE_KEY] is first


def test_code_without_a_pytest_config_runs_as_a_single_process() -> None:
    assert role_of(None) == Role() and role_of(None).runs_tests
