"""pytest-topsail: AI/ML performance and scale tests on Kubernetes as pytest suites.

The public API for suites and fixture modules is what this package exposes (``import pytest_topsail as topsail``),
listed in ``__all__`` and walked through in docs/writing-a-suite.md; modules not named here are private by
convention, like pytest's ``_pytest``. The domain libraries (``pytest_topsail.scale``, ``.tgis``, ``.llmload``,
``.fine_tuning``) and ``pytest_topsail.kube`` have public fronts too: the names of their package's ``__all__``
(``from pytest_topsail.tgis import TgisClient``), never their modules. Names are imported on first use
(``pytest_topsail.fronts``), so that loading the plugin costs nothing when no suite runs.

PYTEST_DONT_REWRITE: an editable install is found by setuptools' own import finder, which pytest's assertion
rewriter does not see; without this marker every pytester run in the same process warns that the package "cannot be
rewritten". The package uses no bare asserts that would need rewriting.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from pytest_topsail.fronts import lazy_front

__version__ = "0.1.0"

# public name -> module defining it
_EXPORTS = {
    "TopsailError": "pytest_topsail.errors",
    "Case": "pytest_topsail.cases",
    "Config": "pytest_topsail.config",
    "command_args": "pytest_topsail.templates",
    "fixture_command_args": "pytest_topsail.templates",
    "Suite": "pytest_topsail.suites",
    "load_suite": "pytest_topsail.suites",
    "kpi": "pytest_topsail.kpi",
    "KpiRecorder": "pytest_topsail.kpi",
    "step": "pytest_topsail.artifacts",
    "current_artifact_dir": "pytest_topsail.artifacts",
    "Parallel": "pytest_topsail.parallel",
    "run_coroutine": "pytest_topsail.aio",
    "Progress": "pytest_topsail.progress",
    "shared_plotly_js": "pytest_topsail.report.figures",
    "Settings": "pytest_topsail.settings",
    "validate": "pytest_topsail.settings",
    "Kube": "pytest_topsail.kube.client",
    "KubeError": "pytest_topsail.kube.client",
    "ObjectRef": "pytest_topsail.kube.client",
    "connect": "pytest_topsail.kube.client",
    "WaitTimeout": "pytest_topsail.kube.wait",
    "wait_for": "pytest_topsail.kube.wait",
    "wait_condition": "pytest_topsail.kube.wait",
    "wait_deleted": "pytest_topsail.kube.wait",
    "condition_status": "pytest_topsail.conditions",
    "find_condition": "pytest_topsail.conditions",
    "create_namespace": "pytest_topsail.kube.namespaces",
    "delete_namespaces": "pytest_topsail.kube.namespaces",
    "report_leftover": "pytest_topsail.leftovers",
    "artifacts_root": "pytest_topsail.run",
    "suite_of_item": "pytest_topsail.suites",
    "parametrize_cases": "pytest_topsail.cases",
    "resolve_case_files": "pytest_topsail.cases",
    # the cluster and its preparation (pytest_topsail.cluster: the fixtures cluster, namespace)
    "Cluster": "pytest_topsail.cluster.state",
    "ClusterClock": "pytest_topsail.cluster.clock",
    "run_once": "pytest_topsail.cluster.state",
    "add_cleanup": "pytest_topsail.cluster.state",
    "shared_dir": "pytest_topsail.cluster.state",
    "opened_cluster": "pytest_topsail.cluster.state",
    "sim_runtime_images": "pytest_topsail.cluster.sim_profile",
    "ComponentSettings": "pytest_topsail.cluster.settings",
    "Prep": "pytest_topsail.cluster.components",
    "prepare_component": "pytest_topsail.cluster.components",
    "KubeStep": "pytest_topsail.cluster.steps",
    "Ownership": "pytest_topsail.cluster.steps",
    "kube_step": "pytest_topsail.cluster.steps",
    "delete_refs": "pytest_topsail.cluster.steps",
    "rollback": "pytest_topsail.cluster.steps",
    "or_fail": "pytest_topsail.cluster.steps",
}

__all__ = [
    "Case", "Cluster", "ComponentSettings", "Config", "KpiRecorder", "Kube", "KubeError", "KubeStep", "ObjectRef",
    "Ownership", "Parallel", "Prep", "Progress", "Settings", "Suite", "TopsailError", "WaitTimeout", "add_cleanup",
    "artifacts_root", "condition_status", "connect", "create_namespace", "current_artifact_dir", "delete_namespaces",
    "delete_refs", "find_condition", "kpi", "kube_step", "load_suite", "opened_cluster", "or_fail",
    "parametrize_cases", "prepare_component", "report_leftover", "resolve_case_files", "rollback", "run_coroutine",
    "run_once", "shared_dir", "shared_plotly_js", "step", "suite_of_item", "validate", "wait_condition",
    "wait_deleted", "wait_for",
    "ClusterClock", "command_args", "fixture_command_args", "sim_runtime_images",
]

if TYPE_CHECKING:
    from pytest_topsail.aio import run_coroutine
    from pytest_topsail.artifacts import current_artifact_dir, step
    from pytest_topsail.cases import Case, parametrize_cases, resolve_case_files
    from pytest_topsail.cluster.clock import ClusterClock
    from pytest_topsail.cluster.components import Prep, prepare_component
    from pytest_topsail.cluster.settings import ComponentSettings
    from pytest_topsail.cluster.sim_profile import sim_runtime_images
    from pytest_topsail.cluster.state import Cluster, add_cleanup, opened_cluster, run_once, shared_dir
    from pytest_topsail.cluster.steps import KubeStep, Ownership, delete_refs, kube_step, or_fail, rollback
    from pytest_topsail.conditions import condition_status, find_condition
    from pytest_topsail.config import Config
    from pytest_topsail.errors import TopsailError
    from pytest_topsail.kpi import KpiRecorder, kpi
    from pytest_topsail.kube.client import Kube, KubeError, ObjectRef, connect
    from pytest_topsail.kube.namespaces import create_namespace, delete_namespaces
    from pytest_topsail.kube.wait import WaitTimeout, wait_condition, wait_deleted, wait_for
    from pytest_topsail.leftovers import report_leftover
    from pytest_topsail.parallel import Parallel
    from pytest_topsail.progress import Progress
    from pytest_topsail.report.figures import shared_plotly_js
    from pytest_topsail.run import artifacts_root
    from pytest_topsail.settings import Settings, validate
    from pytest_topsail.suites import Suite, load_suite, suite_of_item
    from pytest_topsail.templates import command_args, fixture_command_args


__getattr__, __dir__ = lazy_front(__name__, _EXPORTS)


class _Package(types.ModuleType):
    """``topsail.kpi`` is the KPI decorator, though a submodule ``pytest_topsail.kpi`` exists: importing a submodule
    sets the package attribute of that name to the module, which would replace the decorator. Public names win;
    ``from pytest_topsail.kpi import ...`` still reaches the module (through sys.modules)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
