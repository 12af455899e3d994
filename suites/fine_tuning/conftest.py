"""Fixtures of the fine-tuning suite: its validated settings, the model catalog and the storage PVC."""

from __future__ import annotations

from typing import Any

import pytest

import pytest_topsail as topsail
from pytest_topsail import Cluster
from pytest_topsail.fine_tuning import (
    TINY_MODELS_LABEL,
    Catalog,
    SuiteSettings,
    builtin_catalog,
    storage_setup_pod,
    tail,
)
from pytest_topsail.kube import delete_and_wait, pod_logs


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
def ft_storage(cluster: Cluster, namespace: str, storage: dict[str, Any], ft_settings: SuiteSettings) -> str:
    """The PVC holding models and datasets: the ``storage`` preparation's (cluster.stack), with the catalog's tiny
    models written onto it first when ``storage_setup_image`` is set (the real-trainer preset)."""
    pvc = str(storage["pvc"])
    try:
        claim = cluster.kube.get(topsail.ObjectRef("v1", "PersistentVolumeClaim", pvc, namespace)) or {}
        labels = claim.get("metadata", {}).get("labels") or {}
        if ft_settings.storage_setup_image and labels.get(TINY_MODELS_LABEL) != "yes":
            setup_storage(cluster.kube, namespace, pvc, ft_settings)
    except topsail.TopsailError as error:
        pytest.fail(f"fine-tuning storage PVC {namespace}/{pvc}: {error}", pytrace=False)
    return pvc


def setup_storage(kube: topsail.Kube, namespace: str, pvc: str, settings: SuiteSettings) -> None:
    """Run the storage setup pod to its end (the tiny models and datasets written), then label the PVC."""
    assert settings.storage_setup_image is not None
    pod = storage_setup_pod(namespace, pvc, settings.storage_setup_image)
    ref = topsail.ObjectRef.of(pod)
    delete_and_wait(kube, ref, timeout=settings.timeouts.cleanup)  # a setup pod of an earlier run
    kube.create(pod)
    try:
        done = topsail.wait_for(kube, ref,
                                lambda o: (o or {}).get("status", {}).get("phase") in ("Succeeded", "Failed"),
                                what="to build the tiny models", timeout=settings.timeouts.started)
        if (done or {}).get("status", {}).get("phase") != "Succeeded":
            log = pod_logs(kube, namespace, ref.name, container="setup")
            raise topsail.TopsailError(f"pod {ref.name} ({settings.storage_setup_image}) failed:\n{tail(log)}")
    finally:
        kube.delete(ref)
    kube.patch(topsail.ObjectRef("v1", "PersistentVolumeClaim", pvc, namespace),
               {"metadata": {"labels": {TINY_MODELS_LABEL: "yes"}}})
