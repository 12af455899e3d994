"""Fixtures of the scale suite: a connection pool sized for the submitter, run options, progress.

The cluster comes from the ``cluster`` fixture of fixtures/cluster.py (the simulator shaped by ``cluster.sim``, or a
real cluster with ``--cluster kube``); requesting it by name also makes its facts KPI labels of the items.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pytest_topsail as topsail
from pytest_topsail.scale import RunOptions

POOL_SIZE = 64  # connections: the submitter's threads plus the sampler's three watches


@pytest.fixture
def scale_settings(topsail_suite: topsail.Suite) -> Any:
    """``tests.scale`` validated by settings.py's ScaleSettings (already checked when pytest started)."""
    return topsail_suite.settings("tests.scale")


@pytest.fixture
def scale_api(cluster: Any) -> Iterator[topsail.Kube]:
    """The cluster of the run (fixtures/cluster.py) with its own connection pool per item."""
    kube = cluster.kube.with_pool(POOL_SIZE)
    yield kube
    kube.close()


@pytest.fixture
def scale_options(scale_settings: Any, topsail_artifacts_root: Path) -> RunOptions:
    options = scale_settings.run_options()
    if options.include_plotlyjs != "shared" or not options.plots:
        return options
    return dataclasses.replace(options, plotly_js=topsail.shared_plotly_js(topsail_artifacts_root))


@pytest.fixture
def scale_progress(request: pytest.FixtureRequest, scale_settings: Any, artifact_dir: Path) -> Iterator[Any]:
    progress = topsail.Progress(request.config, log=artifact_dir / "progress.log", enabled=scale_settings.progress,
                                prefix="")
    yield progress
    progress.close()
