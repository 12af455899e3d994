"""Fixtures of the scale suite: an API connection to the cluster, run options from the configuration, progress.

The cluster comes from the ``cluster`` fixture of fixtures/cluster.py (the simulator shaped by ``cluster.sim``, or a
real cluster with ``--cluster kube``); requesting it by name also makes its facts KPI labels of the items.
"""

from __future__ import annotations

import copy
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.config import Config
from pytest_topsail.errors import TopsailError
from pytest_topsail.scale.kubeapi import RawApi, api_client_for, api_client_from_kubeconfig
from pytest_topsail.scale.latency import Threshold
from pytest_topsail.scale.run import RunOptions

POOL_SIZE = 64  # connections: the submitter's threads plus the sampler's three watches


def raw_api_for(cluster: Any) -> RawApi:
    """A ``RawApi`` on the cluster fixture's connection settings, with a connection pool sized for the submitter."""
    kube = getattr(cluster, "kube", cluster)
    api_client = getattr(kube, "api_client", None)
    if api_client is not None:
        return RawApi(api_client_for(copy.deepcopy(api_client.configuration), POOL_SIZE))
    kubeconfig = getattr(cluster, "kubeconfig_path", None) or getattr(cluster, "kubeconfig", None)
    if kubeconfig is None:
        raise TopsailError(f"scale suite: the cluster fixture ({type(cluster).__name__}) gives no API client "
                           "and no kubeconfig")
    return RawApi(api_client_from_kubeconfig(str(kubeconfig), getattr(cluster, "context", None), POOL_SIZE))


@pytest.fixture
def scale_api(cluster: Any) -> Iterator[RawApi]:
    """Raw JSON access to the cluster of the run (fixtures/cluster.py), its own connection pool per item."""
    try:
        api = raw_api_for(cluster)
    except TopsailError as error:
        pytest.fail(str(error), pytrace=False)
    yield api
    api.client.close()


@pytest.fixture
def scale_options(topsail_config: Config) -> RunOptions:
    where = f"{topsail_config.source}: tests.scale.thresholds"
    raw_thresholds = topsail_config.get("tests.scale.thresholds", []) or []
    if not isinstance(raw_thresholds, list):
        pytest.fail(f"{where} must be a list of {{step, metric, max_ms}}", pytrace=False)
    try:
        thresholds = tuple(Threshold.parse(raw, where) for raw in raw_thresholds)
    except TopsailError as error:
        pytest.fail(str(error), pytrace=False)
    return RunOptions(
        namespace_prefix=str(topsail_config.get("tests.scale.namespace_prefix", "scale")),
        thresholds=thresholds,
        keep=bool(topsail_config.get("tests.scale.keep", False)),
        plots=bool(topsail_config.get("tests.scale.plots", True)),
        include_plotlyjs=topsail_config.get("tests.scale.include_plotlyjs", "cdn"),
        cleanup_timeout_s=float(topsail_config.get("tests.scale.cleanup_timeout_s", 60)),
    )


class ProgressStream:
    """Progress lines into ``progress.log`` of the item and, when asked, on the terminal past pytest's capture."""

    def __init__(self, path: Path, capture_manager: Any | None) -> None:
        self.file = path.open("a", encoding="utf-8")
        self.capture_manager = capture_manager
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            self.file.write(text)
            if self.capture_manager is not None:
                with self.capture_manager.global_and_fixture_disabled():
                    sys.stderr.write(text)
                    sys.stderr.flush()
        return len(text)

    def flush(self) -> None:
        with self.lock:
            self.file.flush()

    def close(self) -> None:
        with self.lock:
            self.file.close()


@pytest.fixture
def scale_progress(request: pytest.FixtureRequest, topsail_config: Config, artifact_dir: Path) -> Iterator[Any]:
    on_terminal = bool(topsail_config.get("tests.scale.progress", True)) and not hasattr(request.config, "workerinput")
    capture_manager = request.config.pluginmanager.getplugin("capturemanager") if on_terminal else None
    stream = ProgressStream(artifact_dir / "progress.log", capture_manager)
    if on_terminal:
        stream.write("\n")
    yield stream
    stream.close()
