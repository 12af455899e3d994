"""What a suite stands on: the session fixtures its ``cluster.stack`` names (e.g. ``[gpu_operator, rhoai, storage]``),
prepared in that order before the suite's first item, once per run (each fixture runs its component once, also under
xdist). A failure of the stack is the suite's start-up failure: one message, the run stopped, nothing run against a
cluster that is not ready for it.
"""

from __future__ import annotations

import difflib

import pytest

from pytest_topsail.cluster.settings import ClusterSettings
from pytest_topsail.suites import Suite, suite_of_item

STACK_FAILED = pytest.StashKey[str]()
PREPARATIONS = ("gpu_operator", "rhoai", "storage")


def stack_of(suite: Suite) -> list[str]:
    return list(suite.settings("cluster", ClusterSettings).stack)


def prepare_stack(request: pytest.FixtureRequest) -> None:
    """Request the fixtures of the item's suite's stack, in order; the first failure stops the run."""
    session = request.session
    failed = session.stash.get(STACK_FAILED, None)
    if failed is not None:
        pytest.fail(failed, pytrace=False)
    suite = suite_of_item(request.node)
    if suite is None:
        return
    for name in stack_of(suite):
        try:
            request.getfixturevalue(name)
        except pytest.FixtureLookupError:
            close = difflib.get_close_matches(name, PREPARATIONS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            message = f"{suite.config.source}: cluster.stack: no fixture named {name!r} ({hint}the preparation " \
                      f"fixtures: {', '.join(PREPARATIONS)}; or one of the suite's conftest.py)"
        except pytest.fail.Exception as failure:
            message = f"{suite.name}: cluster.stack: {name}: {failure.msg}"
        else:
            continue
        session.stash[STACK_FAILED] = message
        session.shouldstop = f"the cluster preparation of suite {suite.name} failed"
        pytest.fail(message, pytrace=False)
