"""KPIs of the fine-tuning suite, computed from a ``PointMetrics`` (pytest_topsail.fine_tuning.metrics).

G = pods x GPUs per pod. transformers 4.x reports train_tokens_per_second per device (x G here), 5.x gives the job's
tokens seen (no x G); dataset tokens are those of the trained text, every epoch (docs/fine-tuning.md "KPIs"). MFU and
scaling efficiency: docs/fine-tuning.md "Efficiency KPIs".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_topsail import TopsailError, kpi
from pytest_topsail.fine_tuning import (
    GPU_LABELS,
    PointMetrics,
    builtin_catalog,
    by_dimension_figure,
    efficiency_figure,
    group_efficiencies,
    load_point,
    parse_file,
    point_shape,
    replot_baseline,
    runs_figures,
    scaling_figure,
    scaling_scope,
)

MASTER_LOG = "pod.log"


@kpi(unit="tokens/s", help="Tokens processed per second by the whole job (padding included), as the trainer counts",
     higher_better=True, format="{:.0f}")
def train_tokens_per_second(metrics: PointMetrics) -> float | None:
    return metrics.train_tokens_per_second


@kpi(unit="tokens/s", help="Tokens processed per second by one GPU (padding included)", higher_better=True,
     format="{:.0f}")
def train_tokens_per_gpu_per_second(metrics: PointMetrics) -> float | None:
    return metrics.train_tokens_per_gpu_per_second


@kpi(unit="tokens/s", help="Dataset tokens trained per second (every epoch counted, no padding)", higher_better=True,
     format="{:.0f}")
def dataset_tokens_per_second(metrics: PointMetrics) -> float | None:
    return metrics.dataset_tokens_per_second


@kpi(unit="tokens/s", help="Dataset tokens trained per second and GPU", higher_better=True, format="{:.0f}")
def dataset_tokens_per_second_per_gpu(metrics: PointMetrics) -> float | None:
    return metrics.dataset_tokens_per_second_per_gpu


@kpi(unit="hours/Mtoken", help="Number of GPU hours required to process a million dataset tokens",
     lower_better=True, format="{:.3f}")
def gpu_hours_per_million_tokens(metrics: PointMetrics) -> float | None:
    return metrics.gpu_hours_per_million_tokens


@kpi(unit="s", help="Duration of the training loop, as the trainer reports it", lower_better=True, format="{:.1f}")
def train_runtime(metrics: PointMetrics) -> float | None:
    return metrics.train_runtime


@kpi(unit="samples/s", help="Training samples per second", higher_better=True, format="{:.2f}")
def train_samples_per_second(metrics: PointMetrics) -> float | None:
    return metrics.results.value("train_samples_per_second")


@kpi(unit="steps/s", help="Optimizer steps per second", higher_better=True, format="{:.3f}")
def train_steps_per_second(metrics: PointMetrics) -> float | None:
    return metrics.results.value("train_steps_per_second")


@kpi(unit="tokens", help="Average tokens of a training sample after truncation (a property of the dataset)",
     higher_better=True, ignored_for_regression=True, format="{:.1f}", why="a property of the dataset, not of the run")
def avg_tokens_per_sample(metrics: PointMetrics) -> float | None:
    return metrics.results.value("avg_tokens_per_sample")


@kpi(unit="%", help="Model FLOPs utilization: model FLOPs per token (6N full, 4N LoRA, plus attention) x the job's "
     "tokens/s over its devices' dense peak for the point's dtype: a GPU's datasheet peak, or on CPU (real-trainer "
     "preset) the peak the trainer measured with a matmul benchmark at its start", higher_better=True,
     format="{:.1f}")
def mfu(metrics: PointMetrics) -> float | None:
    return metrics.mfu_percent


@kpi(unit="TFLOP/s", help="Dense peak of one device for the point's dtype (the MFU's denominator): a GPU's datasheet "
     "value, or on CPU measured by the trainer (a matmul benchmark at its start: this machine at that moment)",
     higher_better=True, ignored_for_regression=True, why="the hardware's peak, not a performance of the run",
     format="{:.4g}")
def device_peak_tflops(metrics: PointMetrics) -> float | None:
    peak = metrics.device_peak
    return None if peak is None else peak.flops_per_second / 1e12


@kpi(unit="ratio", help="Scaling efficiency: the job's tokens/s over (GPU count / the group's smallest) x the tokens/s "
     "of the same point at its group's smallest GPU count; 1.0 is perfect scaling", higher_better=True, scope="run",
     format="{:.3f}")
def scaling_efficiency(metrics: PointMetrics) -> float | None:
    return metrics.scaling_efficiency


@dataclass(frozen=True)
class ReplotMetrics(PointMetrics):
    """A replotted point's metrics and the labels of its run-scoped KPIs (the replot's ``kpis.scope``)."""

    kpi_scopes: dict[str, dict[str, Any]] = field(default_factory=dict)


def parse(artifact_dir: Path) -> ReplotMetrics:
    """--topsail-replot: the KPIs again from the saved master log and the point's validated settings (MFU with the
    built-in catalog's model; the scaling efficiency against its group's point at the smallest GPU count among the
    saved points, from that point's saved log)."""
    directory = Path(artifact_dir)
    point = load_point(directory)
    try:
        shape = point_shape(point, builtin_catalog(), str(directory))
    except TopsailError:
        shape = None  # a model of the suite's own catalog: no MFU in the replot
    baseline = replot_baseline(directory, point)
    scopes = {"run": scaling_scope(point, baseline.gpus)} if baseline is not None else {}
    return ReplotMetrics(parse_file(directory / MASTER_LOG), gpus=point.world_size, epochs=point.epochs, shape=shape,
                         baseline=baseline, kpi_scopes=scopes)


def samples(artifact_dir: Path) -> dict[str, list[float]]:
    """The raw samples of the throughput and runtime KPIs, per logged step (PointMetrics.step_samples: a compare of
    two runs bootstraps them); {} when the master log is missing, unreadable or carries no per-step time."""
    directory = Path(artifact_dir)
    try:
        point = load_point(directory)
        results = parse_file(directory / MASTER_LOG)
    except (OSError, TopsailError):
        return {}
    return PointMetrics(results, gpus=point.world_size, epochs=point.epochs).step_samples()


def compare_figures(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """python -m pytest_topsail.compare: each point's loss curve overlaid run by run, tokens/s by GPU count."""
    return runs_figures(runs, MASTER_LOG)


SCALING_KPIS = ("train_tokens_per_second", "dataset_tokens_per_second")
DIMENSIONS = ("model_name", "tuning_method", "per_device_train_batch_size", "max_seq_length", "effective_batch_size")


def figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Suite figures: the job's throughput, MFU and scaling efficiency against its GPU count (with perfect scaling)
    when the GPU count varies, and tokens/s/GPU by each other dimension that varies."""
    entries = [k for r in records for k in r.get("kpis") or [] if k.get("name")]
    built: dict[str, Any] = {}

    def varying(label: str) -> bool:
        return len({str(k["labels"].get(label)) for k in entries}) > 1

    def series(labels: dict[str, Any], skip: str) -> str:
        return " ".join(f"{d}={labels.get(d)}" for d in DIMENSIONS if d != skip and varying(d)) or "all"

    if varying("accelerator_count"):
        for name in SCALING_KPIS:
            points = [{"gpus": k["labels"]["accelerator_count"], "value": k["value"],
                       "series": series(k["labels"], "effective_batch_size")} for k in entries if k["name"] == name]
            built[f"{name} vs GPU count"] = scaling_figure(points, name, higher_better=True)
        built.update(efficiency_figures(entries, series))
    per_gpu = [k for k in entries if k["name"] == "train_tokens_per_gpu_per_second"]
    for dimension in DIMENSIONS:
        if dimension != "effective_batch_size" and varying(dimension):
            points = [{dimension: k["labels"].get(dimension), "value": k["value"],
                       "series": f"{k['labels'].get('accelerator_count')} GPU(s)"} for k in per_gpu]
            built[f"tokens/s/GPU by {dimension}"] = by_dimension_figure(points, dimension,
                                                                       "train_tokens_per_gpu_per_second")
    return built


def efficiency_figures(entries: list[dict[str, Any]], series: Any) -> dict[str, Any]:
    """MFU and scaling efficiency against the GPU count, one line per series; the efficiency from every point's
    tokens/s (a replot too), against its group's smallest GPU count."""
    def group(labels: dict[str, Any]) -> str:
        return repr(sorted((k, str(v)) for k, v in labels.items() if k not in GPU_LABELS))

    peaks = {k["test_uuid"]: k["value"] for k in entries if k["name"] == "device_peak_tflops"}
    mfu_points = [{"gpus": k["labels"]["accelerator_count"], "value": k["value"],
                   "series": series(k["labels"], "effective_batch_size"),
                   "text": f"peak {peaks.get(k['test_uuid'], 0):.4g} TFLOP/s per device"}
                  for k in entries if k["name"] == "mfu"]
    tokens = [{"gpus": k["labels"]["accelerator_count"], "value": k["value"], "group": group(k["labels"]),
               "series": series(k["labels"], "effective_batch_size")}
              for k in entries if k["name"] == "train_tokens_per_second"]
    efficiencies = [{**e, "text": f"against {e['baseline_gpus']} GPU(s)"} for e in group_efficiencies(tokens)]
    built = {}
    if mfu_points:
        built["MFU vs GPU count"] = efficiency_figure(mfu_points, "MFU vs GPU count", "MFU (%)")
    if efficiencies:
        built["scaling efficiency vs GPU count"] = efficiency_figure(
            efficiencies, "scaling efficiency vs GPU count", "tokens/s / (GPU ratio x baseline tokens/s)", 1.0)
    return built
