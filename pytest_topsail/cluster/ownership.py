"""Ownership labels: every namespace a run creates through its connection (the test namespaces, the operator
namespaces of the preparation fixtures, a suite's own such as scale's) carries the labels of
:func:`ownership_labels` (``topsail.project``, ``topsail.run``; ``Kube.namespace_labels``), by which the next run
finds what a killed run left (``cluster/killed_runs.py``). A kept namespace loses its run label and gets
``topsail.kept=true`` (:func:`disown_namespaces`): no later run takes it for a leftover.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from pytest_topsail.cluster.state import ClusterSession
from pytest_topsail.cluster.steps import Ownership
from pytest_topsail.kube.namespaces import KEPT
from pytest_topsail.run import state_of

MANAGED_BY = {"app.kubernetes.io/managed-by": "pytest-topsail"}
PROJECT_LABEL = "topsail.project"
RUN_LABEL = "topsail.run"


def project_id(rootdir: Path) -> str:
    """The project of a run as a label value: its rootdir's name and a hash of its path."""
    digest = hashlib.sha256(str(rootdir.resolve()).encode()).hexdigest()[:10]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", rootdir.resolve().name).strip("-_.")[:40] or "project"
    return f"{name}-{digest}"


def ownership_labels(config: pytest.Config) -> dict[str, str]:
    """The labels of every namespace this run creates: which project and run own it."""
    state = state_of(config)
    return {**MANAGED_BY, PROJECT_LABEL: project_id(state.rootdir), RUN_LABEL: state.run_id}


def disown_namespaces(state: ClusterSession, owner: Ownership) -> None:
    """Kept namespaces lose their run label and get the kept one: no later run takes them for what a killed run
    left, and ``kubectl get namespaces -l topsail.kept=true`` finds them."""
    if state.cluster is None or state.discards_cluster:
        return
    for ref in owner.created:
        if (ref.api_version, ref.kind) == ("v1", "Namespace"):
            state.cluster.kube.patch(ref, {"metadata": {"labels": {RUN_LABEL: None, **KEPT}}})
