"""KPI formulas of a fine-tuning point and the scaling figures' speedup/efficiency (docs/fine-tuning.md "KPIs").

G is the job's GPU count: pods x GPUs per pod (TOPSAIL used the GPUs of one pod). The trainer reports
train_tokens_per_second per device, so the job's value is that x G. Dataset tokens count the dataset once per epoch.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_topsail.fine_tuning.trainer_log import TrainerResults


@dataclass(frozen=True)
class PointMetrics:
    """Everything the KPI functions read: the parsed trainer output and the shape of the job."""

    results: TrainerResults
    gpus: int  # pods x GPUs per pod
    epochs: float

    def _per_device(self, key: str) -> float | None:
        return self.results.value(key)

    @property
    def train_runtime(self) -> float | None:
        return self._per_device("train_runtime")

    @property
    def train_tokens_per_second(self) -> float | None:
        per_device = self._per_device("train_tokens_per_second")
        return None if per_device is None else per_device * self.gpus

    @property
    def train_tokens_per_gpu_per_second(self) -> float | None:
        return self._per_device("train_tokens_per_second")

    @property
    def dataset_tokens_per_second(self) -> float | None:
        tokens, runtime = self.results.value("total_tokens"), self.train_runtime
        if tokens is None or not runtime:
            return None
        return tokens * self.epochs / runtime

    @property
    def dataset_tokens_per_second_per_gpu(self) -> float | None:
        value = self.dataset_tokens_per_second
        return None if value is None else value / self.gpus

    @property
    def gpu_hours_per_million_tokens(self) -> float | None:
        value = self.dataset_tokens_per_second
        return None if not value else 1e6 / value / 3600.0 * self.gpus


def speedup(value: float, baseline: float, higher_better: bool) -> float:
    """How many times better `value` is than `baseline`: value/baseline for a throughput, baseline/value for a time."""
    if value <= 0 or baseline <= 0:
        return 0.0
    return value / baseline if higher_better else baseline / value


def scaling_efficiency(value: float, baseline: float, gpus: float, baseline_gpus: float, higher_better: bool) -> float:
    """Speedup divided by the GPU ratio: 1.0 is perfect scaling of the job's total throughput (or runtime)."""
    ratio = gpus / baseline_gpus if baseline_gpus > 0 else 0.0
    return speedup(value, baseline, higher_better) / ratio if ratio > 0 else 0.0
