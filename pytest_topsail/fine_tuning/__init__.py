"""The fine-tuning suite's library: settings of one point, the model catalog, the memory estimate, the PyTorchJob
of a point and its run, trainer log parsing and the KPI formulas (docs/fine-tuning.md). Kubernetes access goes
through pytest_topsail.kube.

The front: suites use the names of ``__all__`` (``from pytest_topsail.fine_tuning import PointRun``), never a module
of the package: the suite's settings (``SuiteSettings``) and one point's (``PointSettings``, ``validate_point``,
``save_point``/``load_point`` beside the item's artifacts), the model and dataset catalog (``Catalog``,
``builtin_catalog``), the pre-flight memory estimate (``memory_estimate`` -> ``MemoryEstimate``) and the point's
shape the FLOPs are counted on (``point_shape``), one point's run (``PointRun``), the storage PVC's setup pod
(``storage_setup_pod``, ``TINY_MODELS_LABEL``), the trainer's log (``parse_file``, ``tail``), its KPIs
(``PointMetrics``, MFU and scaling efficiency included) and figures (``loss_curve``, ``scaling_figure``,
``by_dimension_figure``, ``efficiency_figure``), the scaling groups of a matrix (``smallest_gpus``,
``saved_baseline``, ``replot_baseline``, ``group_efficiencies``, ``GPU_LABELS``; a point's KPI labels
``point_labels`` and its scaling KPI's ``scaling_scope``). Names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_topsail.fronts import lazy_front

# public name -> module defining it
_EXPORTS = {
    "Catalog": "pytest_topsail.fine_tuning.catalog",
    "builtin_catalog": "pytest_topsail.fine_tuning.catalog",
    "MemoryEstimate": "pytest_topsail.fine_tuning.estimate",
    "memory_estimate": "pytest_topsail.fine_tuning.estimate",
    "point_shape": "pytest_topsail.fine_tuning.estimate",
    "TINY_MODELS_LABEL": "pytest_topsail.fine_tuning.manifests",
    "storage_setup_pod": "pytest_topsail.fine_tuning.manifests",
    "PointMetrics": "pytest_topsail.fine_tuning.metrics",
    "by_dimension_figure": "pytest_topsail.fine_tuning.plots",
    "efficiency_figure": "pytest_topsail.fine_tuning.plots",
    "loss_curve": "pytest_topsail.fine_tuning.plots",
    "runs_figures": "pytest_topsail.fine_tuning.plots",
    "scaling_figure": "pytest_topsail.fine_tuning.plots",
    "PointSettings": "pytest_topsail.fine_tuning.point",
    "load_point": "pytest_topsail.fine_tuning.point",
    "save_point": "pytest_topsail.fine_tuning.point",
    "validate_point": "pytest_topsail.fine_tuning.point",
    "PointRun": "pytest_topsail.fine_tuning.run",
    "GPU_LABELS": "pytest_topsail.fine_tuning.scaling",
    "group_efficiencies": "pytest_topsail.fine_tuning.scaling",
    "point_labels": "pytest_topsail.fine_tuning.scaling",
    "replot_baseline": "pytest_topsail.fine_tuning.scaling",
    "saved_baseline": "pytest_topsail.fine_tuning.scaling",
    "scaling_scope": "pytest_topsail.fine_tuning.scaling",
    "smallest_gpus": "pytest_topsail.fine_tuning.scaling",
    "SuiteSettings": "pytest_topsail.fine_tuning.settings",
    "parse_file": "pytest_topsail.fine_tuning.trainer_log",
    "tail": "pytest_topsail.fine_tuning.trainer_log",
}
__all__ = [
    "GPU_LABELS", "Catalog", "MemoryEstimate", "PointMetrics", "PointRun", "PointSettings", "SuiteSettings",
    "TINY_MODELS_LABEL", "builtin_catalog", "by_dimension_figure", "efficiency_figure", "group_efficiencies",
    "load_point", "loss_curve", "memory_estimate", "parse_file", "point_labels", "point_shape", "replot_baseline",
    "runs_figures", "save_point", "saved_baseline", "scaling_figure", "scaling_scope", "smallest_gpus",
    "storage_setup_pod", "tail", "validate_point",
]

if TYPE_CHECKING:
    from pytest_topsail.fine_tuning.catalog import Catalog, builtin_catalog
    from pytest_topsail.fine_tuning.estimate import MemoryEstimate, memory_estimate, point_shape
    from pytest_topsail.fine_tuning.manifests import TINY_MODELS_LABEL, storage_setup_pod
    from pytest_topsail.fine_tuning.metrics import PointMetrics
    from pytest_topsail.fine_tuning.plots import (
        by_dimension_figure,
        efficiency_figure,
        loss_curve,
        runs_figures,
        scaling_figure,
    )
    from pytest_topsail.fine_tuning.point import PointSettings, load_point, save_point, validate_point
    from pytest_topsail.fine_tuning.run import PointRun
    from pytest_topsail.fine_tuning.scaling import (
        GPU_LABELS,
        group_efficiencies,
        point_labels,
        replot_baseline,
        saved_baseline,
        scaling_scope,
        smallest_gpus,
    )
    from pytest_topsail.fine_tuning.settings import SuiteSettings
    from pytest_topsail.fine_tuning.trainer_log import parse_file, tail

__getattr__, __dir__ = lazy_front(__name__, _EXPORTS)
