"""Fixtures of the engine: the item's suite, its configuration and artifact directories."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported in the fixtures: a run that reaches no suite never loads the engine
    from pytest_topsail.config import Config
    from pytest_topsail.progress import Progress
    from pytest_topsail.suites import Suite


@pytest.fixture
def topsail_suite(request: pytest.FixtureRequest) -> Suite:
    """The suite the requesting test belongs to (fails the test when it belongs to none)."""
    from pytest_topsail.errors import TopsailError
    from pytest_topsail.suites import suite_of_item

    try:
        suite = suite_of_item(request.node)
    except TopsailError as exc:
        pytest.fail(str(exc), pytrace=False)
    if suite is None:
        pytest.fail(f"{request.node.nodeid} is not in a topsail suite (no config.yaml in a directory of "
                    f"the topsail_suites path)", pytrace=False)
    return suite


@pytest.fixture
def topsail_config(topsail_suite: Suite) -> Config:
    """The effective configuration of the test's suite (presets and --var applied)."""
    return topsail_suite.config


@pytest.fixture
def artifact_dir(request: pytest.FixtureRequest) -> Path:
    """The item's own ``NNN__<test-id>/`` directory (created when a suite item starts; on demand otherwise)."""
    from pytest_topsail.artifacts import next_artifact_dir
    from pytest_topsail.items import ITEM_DIR_KEY
    from pytest_topsail.run import artifacts_root

    directory = request.node.stash.get(ITEM_DIR_KEY, None)
    if directory is None:
        directory = next_artifact_dir(request.node.name, parent=artifacts_root(request.config))
        request.node.stash[ITEM_DIR_KEY] = directory
    return directory


@pytest.fixture(scope="session")
def topsail_artifacts_root(pytestconfig: pytest.Config) -> Path:
    """The artifacts root of the run (created on first use); session fixtures put their steps here."""
    from pytest_topsail.run import artifacts_root

    return artifacts_root(pytestconfig)


@pytest.fixture
def progress(request: pytest.FixtureRequest, artifact_dir: Path) -> Iterator[Progress]:
    """The progress stream of the item: ``progress.log`` in its directory, the terminal past capture (not on
    xdist workers), repeated lines rate-limited. Call it (``progress("waiting for ...")``) or write lines to it."""
    from pytest_topsail.progress import Progress

    stream = Progress(request.config, log=artifact_dir / "progress.log")
    yield stream
    stream.close()
