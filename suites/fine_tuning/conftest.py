"""Fixtures of the fine-tuning suite: its validated settings, the model catalog and the storage PVC."""

from __future__ import annotations

import pytest

import pytest_topsail as topsail
from pytest_topsail import Cluster
from pytest_topsail.fine_tuning.catalog import Catalog, builtin_catalog
from pytest_topsail.fine_tuning.settings import SuiteSettings


@pytest.fixture
def ft_settings(topsail_suite: topsail.Suite) -> SuiteSettings:
    return topsail_suite.settings("tests.fine_tuning")


@pytest.fixture
def ft_catalog(ft_settings: SuiteSettings, topsail_config: topsail.Config) -> Catalog:
    try:
        return builtin_catalog().extended(ft_settings.catalog, f"{topsail_config.source}: tests.fine_tuning.catalog")
    except topsail.TopsailError as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture
def ft_storage(cluster: Cluster, namespace: str, ft_settings: SuiteSettings) -> str:
    """The PVC holding models and datasets (created once, removed with the namespace)."""
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": ft_settings.storage_pvc, "namespace": namespace},
             "spec": {"accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": ft_settings.storage_size}}}}
    try:
        if cluster.kube.get(topsail.ObjectRef.of(claim)) is None:
            cluster.kube.apply(claim)
    except topsail.TopsailError as error:
        pytest.fail(f"fine-tuning storage PVC {namespace}/{ft_settings.storage_pvc}: {error}", pytrace=False)
    return ft_settings.storage_pvc
