"""Fixtures of the fine-tuning suite: its validated settings, the storage PVC, the catalog and progress lines."""

from __future__ import annotations

from typing import Any

import pytest

from fixtures.cluster import Cluster
from fixtures.steps import Progress
from pytest_topsail.config import Config
from pytest_topsail.errors import TopsailError
from pytest_topsail.fine_tuning.catalog import Catalog, builtin_catalog
from pytest_topsail.fine_tuning.settings import SuiteSettings, validate_suite
from pytest_topsail.kube.client import ObjectRef


@pytest.fixture
def ft_settings(topsail_config: Config) -> SuiteSettings:
    try:
        return validate_suite(topsail_config.get("tests.fine_tuning", {}),
                              f"{topsail_config.source}: tests.fine_tuning")
    except TopsailError as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture
def ft_catalog(ft_settings: SuiteSettings, topsail_config: Config) -> Catalog:
    try:
        return builtin_catalog().extended(ft_settings.catalog, f"{topsail_config.source}: tests.fine_tuning.catalog")
    except TopsailError as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture
def ft_storage(cluster: Cluster, namespace: str, ft_settings: SuiteSettings) -> str:
    """The PVC holding models and datasets (created once, kept with the namespace)."""
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": ft_settings.storage_pvc, "namespace": namespace},
             "spec": {"accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": ft_settings.storage_size}}}}
    try:
        if cluster.kube.get(_ref(claim)) is None:
            cluster.kube.apply(claim)
    except TopsailError as error:
        pytest.fail(f"fine-tuning storage PVC {namespace}/{ft_settings.storage_pvc}: {error}", pytrace=False)
    return ft_settings.storage_pvc


def _ref(manifest: dict[str, Any]) -> ObjectRef:
    return ObjectRef.of(manifest)


@pytest.fixture
def ft_progress(request: pytest.FixtureRequest, ft_settings: SuiteSettings) -> Progress:
    return Progress(request.config, enabled=ft_settings.progress)
