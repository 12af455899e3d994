"""Scaling groups of a fine-tuning matrix: the points that differ only in GPU count (pods, GPUs per pod), and the
baseline a point's scaling efficiency is measured against, its group's point at the smallest GPU count of the
matrix, read from that point's saved artifacts (its ``point.yaml`` and master log) beside the item's directory.

A point that ends before its baseline (xdist runs them side by side), or whose baseline failed or was skipped, has
no baseline: its scaling efficiency is not recorded (the suite's scaling figure, drawn from every point's tokens/s at
the end of the run, still shows it).
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
