"""Deltas, quantiles and kube-burner-style error accounting over timelines; latency tables; thresholds.

Error accounting (as kube-burner's podLatency): a negative delta is clamped to 0 and counted as an error; a step
that an applicable job never reached (or that was not observed) is counted as an error, never silently dropped.
When more than 10% of the expected values are errors, the step reports no quantiles.
Quantiles are nearest-rank: P99 of 1,000 values is the 990th smallest.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.scale.lifecycle import Lifecycle
from pytest_topsail.scale.timelines import (
    JOB_STEPS,
    LIFECYCLE,
    POD_STEPS,
    SOURCE_STEPS,
    SOURCES,
    Timeline,
    transitions,
)

MAX_ERROR_RATIO = 0.10
METRICS = ("P50", "P95", "P99", "max", "avg")
THRESHOLD_METRICS = ("P50", "P90", "P95", "P99", "max", "avg")


@dataclass
class StepStats:
    level: str  # "job" (from submission / workload creation), "pod" (from pod creation), or a lifecycle's name
    source: str  # "watch" or "object"; "lifecycle": the times a lifecycle reports (its steps' `time`)
    step: str  # a lifecycle's: a transition "<step>-><next step>"
    expected: int
    count: int
    negative: int
    missing: int
    P50: float | None = None  # noqa: N815 - metric names as users write them in thresholds
    P90: float | None = None  # noqa: N815
    P95: float | None = None  # noqa: N815
    P99: float | None = None  # noqa: N815
    max: float | None = None
    avg: float | None = None
    min: float | None = None

    @property
    def errors(self) -> int:
        return self.negative + self.missing

    @property
    def has_quantiles(self) -> bool:
        return self.P50 is not None

    def metric(self, name: str) -> float | None:
        return getattr(self, name)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "errors": self.errors}


def nearest_rank(sorted_values: list[float], percent: float) -> float:
    rank = max(math.ceil(percent / 100.0 * len(sorted_values)), 1)
    return sorted_values[rank - 1]


def step_stats(timelines: list[Timeline], level: str, source: str, step: str) -> StepStats:
    """From each timeline's base to `step`."""
    deltas = [t.delta(source, step) for t in timelines if step in t.applicable]
    return summarise(level, source, step, deltas)


def transition_stats(timelines: list[Timeline], level: str, first: str, second: str) -> StepStats:
    """From step `first` to step `second` of each timeline to which `second` applies (a lifecycle's times)."""
    deltas = [t.between(LIFECYCLE, first, second) for t in timelines if second in t.applicable]
    return summarise(level, LIFECYCLE, f"{first}->{second}", deltas)


def summarise(level: str, source: str, step: str, deltas: list[float | None]) -> StepStats:
    """Quantiles of the expected `deltas` (None: missing), with kube-burner's error accounting."""
    values = [max(d, 0.0) for d in deltas if d is not None]
    negative = sum(1 for d in deltas if d is not None and d < 0)
    missing = sum(1 for d in deltas if d is None)
    stats = StepStats(level, source, step, len(deltas), len(values), negative, missing)
    if not values or (negative + missing) > MAX_ERROR_RATIO * len(deltas):
        return stats
    values.sort()
    stats.P50, stats.P90, stats.P95, stats.P99 = (round(nearest_rank(values, p), 3) for p in (50, 90, 95, 99))
    stats.max, stats.min = round(values[-1], 3), round(values[0], 3)
    stats.avg = round(sum(values) / len(values), 3)
    return stats


def lifecycle_stats(lifecycle: Lifecycle, timelines: list[Timeline]) -> list[StepStats]:
    """One StepStats per transition of `lifecycle` (level: its name)."""
    return [transition_stats(timelines, lifecycle.name, a, b) for a, b in transitions(lifecycle)]


def all_stats(jobs: list[Timeline], pods: list[Timeline]) -> list[StepStats]:
    """Job-level stats for every source and step, then pod-level (kube-burner podLatency) stats."""
    result = [step_stats(jobs, "job", source, step) for source in SOURCES for step in SOURCE_STEPS[source]]
    result += [step_stats(pods, "pod", source, step) for source in SOURCES for step in POD_STEPS]
    return [s for s in result if s.expected]


def find(stats: list[StepStats], step: str, source: str = "watch", level: str = "job") -> StepStats | None:
    for s in stats:
        if s.step == step and s.source == source and s.level == level:
            return s
    return None


def format_table(stats: list[StepStats]) -> str:
    """A fixed-width text table, one line per (level, source, step)."""
    header = ("level", "source", "step", "P50_ms", "P90_ms", "P95_ms", "P99_ms", "max_ms", "avg_ms", "count",
              "errors")
    rows: list[tuple[str, ...]] = [header]
    for s in stats:
        cells = [s.level, s.source, s.step]
        cells += ["-" if v is None else f"{v:.1f}" for v in (s.P50, s.P90, s.P95, s.P99, s.max, s.avg)]
        cells += [str(s.count), f"{s.errors}/{s.expected}"]
        rows.append(tuple(cells))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for row in rows:
        left = [row[i].ljust(widths[i]) for i in range(3)]
        right = [row[i].rjust(widths[i]) for i in range(3, len(header))]
        lines.append("  ".join(left + right).rstrip())
    return "\n".join(lines) + "\n"


def write_tables(stats: list[StepStats], directory: Path) -> None:
    (directory / "latency.txt").write_text(format_table(stats))
    (directory / "latency.json").write_text(json.dumps([s.to_dict() for s in stats], indent=1))


@dataclass(frozen=True)
class Threshold:
    step: str
    metric: str
    max_ms: float
    source: str = "watch"
    level: str = "job"

    @classmethod
    def parse(cls, raw: Any, where: str, lifecycles: list[Lifecycle] | tuple[Lifecycle, ...] = ()) -> Threshold:
        """A threshold of a job or pod step, or (``level: <lifecycle name>``) of a transition ``<step>-><next>`` of
        one of `lifecycles` (measured in the times the lifecycle reports: ``source`` is ``lifecycle``)."""
        if not isinstance(raw, dict) or not {"step", "metric", "max_ms"} <= raw.keys():
            raise TopsailError(f"{where}: a threshold needs step, metric and max_ms, got {raw!r}")
        unknown = set(raw) - {"step", "metric", "max_ms", "source", "level"}
        if unknown:
            raise TopsailError(f"{where}: unknown threshold keys {sorted(unknown)} in {raw!r}")
        named = {lifecycle.name: lifecycle for lifecycle in lifecycles}
        level = raw.get("level", "job")
        if level in named:
            threshold = cls(**{"source": LIFECYCLE, **raw})
            steps = tuple(f"{a}->{b}" for a, b in transitions(named[level]))
            sources: tuple[str, ...] = (LIFECYCLE,)
        else:
            threshold = cls(**raw)
            steps, sources = (JOB_STEPS if level == "job" else POD_STEPS), SOURCES
        if level not in ("job", "pod", *named):
            raise TopsailError(f"{where}: level must be job, pod or a lifecycle of tests.scale.lifecycle "
                               f"({', '.join(named) or 'none configured'}) in {raw!r}")
        if threshold.step not in steps:
            raise TopsailError(f"{where}: unknown step {threshold.step!r}; steps: {', '.join(steps)}")
        if threshold.metric not in THRESHOLD_METRICS:
            raise TopsailError(f"{where}: unknown metric {threshold.metric!r}; metrics: {', '.join(THRESHOLD_METRICS)}")
        if threshold.source not in sources:
            raise TopsailError(f"{where}: source must be {'|'.join(sources)} in {raw!r}")
        if not isinstance(threshold.max_ms, int | float):
            raise TopsailError(f"{where}: max_ms must be a number in {raw!r}")
        return threshold


def check_thresholds(stats: list[StepStats], thresholds: list[Threshold]) -> list[str]:
    """One message per violated threshold, naming step, metric, value and threshold."""
    violations = []
    for t in thresholds:
        s = find(stats, t.step, t.source, t.level)
        where = f"{t.level} step {t.step} ({t.source})"
        if s is None:
            continue  # the step does not apply to this workload (e.g. Completed of a job that runs forever)
        value = s.metric(t.metric)
        if value is None:
            violations.append(
                f"{where} {t.metric}: no value ({s.errors} of {s.expected} values missing or negative, "
                f"more than {MAX_ERROR_RATIO:.0%}) - threshold {t.max_ms:g} ms"
            )
        elif value > t.max_ms:
            violations.append(f"{where} {t.metric} = {value:.1f} ms exceeds threshold {t.max_ms:g} ms")
    return violations
