"""KPI formulas of a fine-tuning point and the scaling figures' speedup/efficiency (docs/fine-tuning.md "KPIs").

G is the job's GPU count: pods x GPUs per pod (TOPSAIL used the GPUs of one pod). transformers 4.x reports
train_tokens_per_second per device, so the job's value is that x G; with transformers 5.x the parser derives the
job's value from the tokens seen by every rank (`TrainerResults.tokens_scope`). Dataset tokens are those of the
training text as the trainer tokenizes it (template applied, end-of-sequence token, truncation), once per epoch.

Efficiency (docs/fine-tuning.md "Efficiency KPIs"):
- MFU = model FLOPs per token x the job's train_tokens_per_second / (G x dense peak of one device for the point's
  dtype), in %: FLOPs per token of pytest_topsail/fine_tuning/estimate.py (6N full, 4N LoRA, plus attention at the
  longest trained sample; no recomputation), the peak of pytest_topsail/fine_tuning/efficiency.py.
- scaling efficiency at G GPUs = train_tokens_per_second(G) / (G/G0 x train_tokens_per_second(G0)), G0 the
  smallest GPU count of the points that differ from this one only in GPU count (`Baseline`): 1.0 is perfect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from pytest_topsail.fine_tuning.efficiency import DevicePeak, device_peak
from pytest_topsail.fine_tuning.estimate import Point, model_flops_per_token
from pytest_topsail.fine_tuning.trainer_log import TrainerResults


@dataclass(frozen=True)
class Baseline:
    """The point a scaling efficiency is measured against: its job's GPU count and tokens/s."""

    gpus: int
    tokens_per_second: float


@dataclass(frozen=True)
class PointMetrics:
    """Everything the KPI functions read: the parsed trainer output and the shape of the job."""

    results: TrainerResults
    gpus: int  # pods x GPUs per pod
    epochs: float
    shape: Point | None = None  # the model and the point's shape (estimate.point_shape): FLOPs per token, dtype
    baseline: Baseline | None = None  # the same point at its group's smallest GPU count, when it differs

    def _per_device(self, key: str) -> float | None:
        return self.results.value(key)

    @property
    def train_runtime(self) -> float | None:
        return self._per_device("train_runtime")

    @property
    def train_tokens_per_second(self) -> float | None:
        value = self.results.value("train_tokens_per_second")
        if value is None or self.results.tokens_scope == "job":
            return value
        return value * self.gpus

    @property
    def train_tokens_per_gpu_per_second(self) -> float | None:
        value = self.train_tokens_per_second
        return None if value is None else value / self.gpus

    @property
    def dataset_tokens(self) -> float | None:
        """Tokens of the training text trained over the run: the trainer's own count when it prints one at the end
        (TRL's num_tokens: it includes the samples a distributed sampler repeats), else the dataset statistics'
        total_tokens x epochs."""
        trained = self.results.trained_tokens
        if trained is not None:
            return trained
        tokens = self.results.value("total_tokens")
        return None if tokens is None else tokens * self.epochs

    @property
    def dataset_tokens_per_second(self) -> float | None:
        tokens, runtime = self.dataset_tokens, self.train_runtime
        if tokens is None or not runtime:
            return None
        return tokens / runtime

    @property
    def dataset_tokens_per_second_per_gpu(self) -> float | None:
        value = self.dataset_tokens_per_second
        return None if value is None else value / self.gpus

    @property
    def gpu_hours_per_million_tokens(self) -> float | None:
        value = self.dataset_tokens_per_second
        return None if not value else 1e6 / value / 3600.0 * self.gpus

    @property
    def flops_per_token(self) -> float | None:
        """Model FLOPs per trained token, the attention term at the longest trained sample (the dataset statistics'
        max_seq_token, within max_seq_length): the sequence the trainer pads its longest batch to."""
        if self.shape is None:
            return None
        longest = self.results.value("max_seq_token")
        seq = min(self.shape.seq, int(longest)) if longest else self.shape.seq
        return model_flops_per_token(replace(self.shape, seq=max(1, seq)))

    @property
    def device_peak(self) -> DevicePeak | None:
        return device_peak(self.results, self.shape.dtype) if self.shape is not None else None

    @property
    def mfu_percent(self) -> float | None:
        flops, tokens, peak = self.flops_per_token, self.train_tokens_per_second, self.device_peak
        if flops is None or tokens is None or peak is None:
            return None
        return 100.0 * flops * tokens / (self.gpus * peak.flops_per_second)

    @property
    def scaling_efficiency(self) -> float | None:
        tokens, base = self.train_tokens_per_second, self.baseline
        if tokens is None or base is None or base.gpus >= self.gpus:
            return None
        return scaling_efficiency(tokens, base.tokens_per_second, self.gpus, base.gpus, higher_better=True)

    def step_samples(self) -> dict[str, list[float]]:
        """Per logged step, the samples of the throughput KPIs and of the runtime (``{KPI name: values}``, what
        ``python -m pytest_topsail.compare`` bootstraps): between two progress lines, the tokens seen (padding
        included, every rank) and the text tokens trained (TRL's num_tokens) over the seconds elapsed, the same per
        GPU, and the seconds themselves. From progress lines that carry the elapsed train_runtime and
        num_input_tokens_seen (transformers 5.x, or include_num_input_tokens_seen): {} otherwise, or below 2 steps."""
        found: dict[str, list[float]] = {"train_runtime": [], "train_tokens_per_second": [],
                                         "dataset_tokens_per_second": []}
        before_t = before_seen = before_text = 0.0
        for progress in self.results.progress:
            values = progress.values
            t, seen = _finite(values.get("train_runtime")), _finite(values.get("num_input_tokens_seen"))
            text = _finite(values.get("num_tokens"))
            if t is None or seen is None:
                continue
            elapsed = t - before_t
            if elapsed > 0 and seen >= before_seen:
                found["train_runtime"].append(elapsed)
                found["train_tokens_per_second"].append((seen - before_seen) / elapsed)
                if text is not None:
                    found["dataset_tokens_per_second"].append((text - before_text) / elapsed)
            before_t, before_seen, before_text = t, seen, before_text if text is None else text
        if len(found["train_runtime"]) < 2:
            return {}
        found["train_tokens_per_gpu_per_second"] = [v / self.gpus for v in found["train_tokens_per_second"]]
        if len(found["dataset_tokens_per_second"]) == len(found["train_runtime"]):
            found["dataset_tokens_per_second_per_gpu"] = [v / self.gpus for v in found["dataset_tokens_per_second"]]
        else:  # a line without num_tokens: its interval's text tokens are unknown
            del found["dataset_tokens_per_second"]
        return found


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def speedup(value: float, baseline: float, higher_better: bool) -> float:
    """How many times better `value` is than `baseline`: value/baseline for a throughput, baseline/value for a time."""
    if value <= 0 or baseline <= 0:
        return 0.0
    return value / baseline if higher_better else baseline / value


def scaling_efficiency(value: float, baseline: float, gpus: float, baseline_gpus: float, higher_better: bool) -> float:
    """Speedup divided by the GPU ratio: 1.0 is perfect scaling of the job's total throughput (or runtime)."""
    ratio = gpus / baseline_gpus if baseline_gpus > 0 else 0.0
    return speedup(value, baseline, higher_better) / ratio if ratio > 0 else 0.0
