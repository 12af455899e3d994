"""Scaling groups of a fine-tuning matrix: the points that differ only in GPU count (pods, GPUs per pod), and the
baseline a point's scaling efficiency is measured against, its group's point at the smallest GPU count of the
matrix, read from that point's saved artifacts (its ``point.yaml`` and master log) beside the item's directory.

A point that ends before its baseline (xdist runs them side by side), or whose baseline failed or was skipped, has
no baseline: its scaling efficiency is not recorded (the suite's scaling figure, drawn from every point's tokens/s at
the end of the run, still shows it). A replot (``replot_baseline``) finds the baseline among the saved points alone,
so it records the efficiency of such a point once its baseline has a result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.fine_tuning.catalog import Catalog
from pytest_topsail.fine_tuning.metrics import Baseline, PointMetrics, scaling_efficiency
from pytest_topsail.fine_tuning.point import POINT_FILE, PointSettings, load_point, validate_point
from pytest_topsail.fine_tuning.run import MASTER_LOG
from pytest_topsail.fine_tuning.trainer_log import parse_file

GPU_FIELDS = frozenset({"pods", "gpus_per_pod"})  # what varies within a scaling group
# the KPI labels of a point that follow from its GPU count: the suite's (suites/fine_tuning) and the case settings'
GPU_LABELS = frozenset({"replicas", "accelerators_per_replica", "accelerator_count", "effective_batch_size",
                        *GPU_FIELDS})


def scaling_group(point: PointSettings) -> str:
    """The settings a point shares with the points it scales against: all but its GPU count."""
    return json.dumps(point.model_dump(mode="json", exclude=set(GPU_FIELDS)), sort_keys=True)


def smallest_gpus(point: PointSettings, cases: Iterable[Mapping[str, Any]], catalog: Catalog) -> int:
    """The smallest GPU count (pods x GPUs per pod) of the points of `cases` (settings of the matrix's cases) in
    `point`'s scaling group; cases that do not validate are left out (their own items fail)."""
    group, counts = scaling_group(point), [point.world_size]
    for settings in cases:
        try:
            other = validate_point(dict(settings), "scaling group").resolved(catalog, "scaling group")
        except TopsailError:
            continue
        if scaling_group(other) == group:
            counts.append(other.world_size)
    return min(counts)


def point_labels(point: PointSettings) -> dict[str, object]:
    """A point's KPI labels (the reference's), the effective batch size counting accumulation and every GPU."""
    labels: dict[str, object] = {
        "model_name": point.model, "tuning_method": point.method, "replicas": point.pods,
        "accelerators_per_replica": point.gpus_per_pod, "accelerator_count": point.world_size,
        "per_device_train_batch_size": point.per_device_batch_size,
        "gradient_accumulation_steps": point.gradient_accumulation_steps,
        "effective_batch_size": point.effective_batch_size, "max_seq_length": point.max_seq_length,
        "container_image": point.container_image, "dataset_name": point.dataset.name,
        "dataset_replication": point.dataset.replication, "epochs": point.epochs, "dtype": point.dtype,
        "flash_attention": point.flash_attention,
    }
    if point.method != "full":
        labels.update(lora_rank=point.lora.r, lora_alpha=point.lora.alpha, lora_dropout=point.lora.dropout,
                      lora_modules=",".join(point.lora.target_modules or ()))
    return labels


def scaling_scope(point: PointSettings, baseline_gpus: int) -> dict[str, object]:
    """The labels of the run-scoped scaling efficiency KPI (``kpis.scope("run", ...)``): the point's labels without
    those of its GPU count, then its GPU count and its baseline's."""
    labels = {k: v for k, v in point_labels(point).items() if k not in GPU_LABELS}
    return {**labels, "accelerator_count": point.world_size, "baseline_accelerator_count": baseline_gpus}


def saved_baseline(directory: Path, point: PointSettings, gpus: int) -> Baseline | None:
    """The job's tokens/s of the point of `point`'s group at `gpus` GPUs, from its artifacts in a sibling of the
    item's `directory`; None when no such point has a parseable master log (yet)."""
    group = scaling_group(point)
    for sibling in sorted(Path(directory).parent.iterdir()):
        if sibling == directory or not (sibling / POINT_FILE).is_file() or not (sibling / MASTER_LOG).is_file():
            continue
        try:
            other = load_point(sibling)
            if other.world_size != gpus or scaling_group(other) != group:
                continue
            tokens = PointMetrics(parse_file(sibling / MASTER_LOG), other.world_size,
                                  other.epochs).train_tokens_per_second
        except TopsailError:
            continue  # a failed point: no baseline
        if tokens:
            return Baseline(gpus, tokens)
    return None


def replot_baseline(directory: Path, point: PointSettings) -> Baseline | None:
    """For a replot: the baseline of the point saved in `directory`, its group's point at the smallest GPU count
    among the saved points beside it (the matrix's cases are not known then); None when that is the point itself or
    has no result."""
    group, smallest = scaling_group(point), point.world_size
    for sibling in Path(directory).parent.iterdir():
        if sibling == Path(directory) or not (sibling / POINT_FILE).is_file():
            continue
        try:
            other = load_point(sibling)
        except TopsailError:
            continue
        if scaling_group(other) == group:
            smallest = min(smallest, other.world_size)
    return saved_baseline(directory, point, smallest) if smallest < point.world_size else None


def group_efficiencies(points: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`points`: {gpus, value (the job's tokens/s), group, series} per point. Each point's scaling efficiency
    against its group's point at the smallest GPU count: {gpus, value, series, baseline_gpus}; groups with one GPU
    count give none."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for point in points:
        groups.setdefault(str(point["group"]), []).append(point)
    efficiencies = []
    for members in groups.values():
        base = min(members, key=lambda p: float(p["gpus"]))
        for member in members:
            if float(member["gpus"]) > float(base["gpus"]):
                efficiencies.append({"gpus": member["gpus"], "series": member["series"], "baseline_gpus": base["gpus"],
                                     "value": scaling_efficiency(float(member["value"]), float(base["value"]),
                                                                 float(member["gpus"]), float(base["gpus"]), True)})
    return efficiencies
