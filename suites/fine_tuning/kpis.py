"""KPIs of the fine-tuning suite, computed from a ``PointMetrics`` (pytest_topsail.fine_tuning.metrics).

G = pods x GPUs per pod. The trainer reports train_tokens_per_second per device; dataset tokens count every epoch.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from pytest_topsail.fine_tuning.metrics import PointMetrics
from pytest_topsail.fine_tuning.settings import validate_point
from pytest_topsail.fine_tuning.trainer_log import parse_file
from pytest_topsail.kpi import kpi

POINT_FILE = "point.yaml"
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
     higher_better=True, ignored_for_regression=True, format="{:.1f}")
def avg_tokens_per_sample(metrics: PointMetrics) -> float | None:
    return metrics.results.value("avg_tokens_per_sample")


def parse(artifact_dir: Path) -> PointMetrics:
    """--topsail-replot: the KPIs again from the saved master log and the point's validated settings."""
    directory = Path(artifact_dir)
    point = validate_point(yaml.safe_load((directory / POINT_FILE).read_text(encoding="utf-8")) or {},
                           str(directory / POINT_FILE))
    return PointMetrics(parse_file(directory / MASTER_LOG), gpus=point.world_size, epochs=point.epochs)
