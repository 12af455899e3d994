"""The preparation fixtures as a pytest plugin (registered by pytest_topsail/plugin.py): wiring only, each fixture
imports its machinery when first used.

| fixture        | scope    | gives                                                                             |
|----------------|----------|-----------------------------------------------------------------------------------|
| `gpu_operator` | session  | NFD + the NVIDIA GPU operator ready, GPU nodes advertising (gpu_operator.py)      |
| `rhoai`        | session  | OpenShift AI with the components the suites in scope need Managed (rhoai.py)     |
| `storage`      | function | the PVC holding the suite's models and datasets, downloaded once (storage.py)     |
| `tgis_workers` | session  | the TGIS model servers, one per (model, config) (tgis_workers.py)                 |

``topsail_cluster_stack`` (autouse) requests, before each suite item, the fixtures of its suite's ``cluster.stack``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_topsail.cluster.state import Cluster
    from pytest_topsail.prepare.tgis_workers import TgisWorkers
    from pytest_topsail.suites import Suite


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("topsail").addoption(
        "--tgis-record", action="store_true", default=False,
        help="TGIS suite: run the reference config (each model's first) and write its answers into the case files "
             "as expectations; other configs are skipped")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("tgis_record", False):
        config.pluginmanager.register(RecordedFiles(), "tgis-recorded-files")


class RecordedFiles:
    """Record mode: the case files the items rewrote (their ``tgis_recorded`` property; reports reach the xdist
    controller), named at the end of the run."""

    def __init__(self) -> None:
        self.paths: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.paths.update(str(value) for name, value in report.user_properties if name == "tgis_recorded")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.paths:
            terminalreporter.section("TGIS record mode")
            terminalreporter.line(f"rewrote {len(self.paths)} case file(s) with the reference's answers:")
            for path in sorted(self.paths):
                terminalreporter.line(f"  {path}")


@pytest.hookimpl(optionalhook=True)
def pytest_topsail_check_suite(suite: Suite) -> None:
    """At start-up: the preparation sections of every suite in scope validate and their arguments render."""
    from pytest_topsail.prepare import gpu_operator, rhoai, storage

    gpu_operator.check_suite(suite)
    rhoai.check_suite(suite)
    storage.check_suite(suite)


@pytest.fixture(autouse=True)
def topsail_cluster_stack(request: pytest.FixtureRequest) -> None:
    from pytest_topsail.prepare.stack import prepare_stack

    prepare_stack(request)


@pytest.fixture(scope="session")
def gpu_operator(request: pytest.FixtureRequest, cluster: Cluster) -> dict[str, Any]:
    """NFD and the GPU operator installed and ready, GPU nodes advertising nvidia.com/gpu. Returns the step result:
    ``nfd_csv``, ``gpu_operator_csv``, ``gpu_nodes``, ``gpus``, ``facts``, ``prepared``, ``created``."""
    from pytest_topsail.prepare.gpu_operator import prepare_once

    return prepare_once(request, cluster)


@pytest.fixture(scope="session")
def rhoai(request: pytest.FixtureRequest, cluster: Cluster) -> dict[str, Any]:
    """OpenShift AI installed and its DataScienceCluster Ready. Returns ``csv``, ``components`` (name -> enabled),
    ``prepared``, ``created``."""
    from pytest_topsail.prepare.rhoai import prepare_once

    return prepare_once(request, cluster)


@pytest.fixture
def storage(request: pytest.FixtureRequest, cluster: Cluster, namespace: str) -> dict[str, Any]:
    """The suite's storage PVC with its ``storage.sources`` downloaded (once per run). Returns ``pvc``,
    ``namespace``, ``sources`` (name -> path on the PVC), ``prepared``, ``created``."""
    from pytest_topsail.prepare.storage import prepare_once

    return prepare_once(request, cluster, namespace)


@pytest.fixture(scope="session")
def tgis_workers(pytestconfig: pytest.Config) -> Iterator[TgisWorkers]:
    from pytest_topsail.prepare.tgis_workers import session_workers

    yield from session_workers(pytestconfig)
