"""Quantiles, kube-burner error accounting, tables and thresholds."""

from __future__ import annotations

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.scale.latency import (
    Threshold,
    all_stats,
    check_thresholds,
    find,
    format_table,
    step_stats,
)
from pytest_topsail.scale.timelines import Timeline, job_timelines, pod_timelines


def timeline(index: int, ready: float | None, base: float = 1000.0) -> Timeline:
    return Timeline(
        key=f"j{index}",
        index=index,
        namespace="ns",
        base={"watch": base, "object": base},
        times={"watch": {"Ready": None if ready is None else base + ready}, "object": {}},
        applicable=("Ready",),
    )


def test_nearest_rank_quantiles_max_and_average():
    stats = step_stats([timeline(i, float(v)) for i, v in enumerate(range(1, 101))], "job", "watch", "Ready")
    assert (stats.P50, stats.P95, stats.P99, stats.max, stats.avg, stats.min) == (50, 95, 99, 100, 50.5, 1)
    assert stats.errors == 0 and stats.count == 100


def test_negative_deltas_are_clamped_to_zero_and_counted():
    timelines = [timeline(i, 100.0) for i in range(19)] + [timeline(19, -30.0)]
    stats = step_stats(timelines, "job", "watch", "Ready")
    assert stats.negative == 1 and stats.errors == 1
    assert stats.min == 0.0 and stats.count == 20


def test_missing_steps_count_as_errors_and_more_than_ten_percent_removes_quantiles():
    ten_percent = [timeline(i, 100.0) for i in range(9)] + [timeline(9, None)]
    stats = step_stats(ten_percent, "job", "watch", "Ready")
    assert stats.missing == 1 and stats.P99 == 100.0  # exactly 10%: still reported
    too_many = [timeline(i, 100.0) for i in range(8)] + [timeline(8, None), timeline(9, -1.0)]
    stats = step_stats(too_many, "job", "watch", "Ready")
    assert stats.errors == 2 and stats.P50 is None and stats.P99 is None and stats.avg is None


def test_not_applicable_steps_are_neither_expected_nor_errors(make_run):
    submitted, sampled = make_run(jobs=5, completes=False)
    stats = all_stats(job_timelines(submitted, sampled), pod_timelines(sampled))
    assert find(stats, "Completed") is None  # jobs that run forever have no Completed step
    ready = find(stats, "Ready")
    assert ready.expected == 5 and ready.errors == 0 and ready.P50 == 51.0


def test_threshold_violation_names_step_metric_value_and_threshold(make_run):
    submitted, sampled = make_run(jobs=20)
    stats = all_stats(job_timelines(submitted, sampled), pod_timelines(sampled))
    ok = Threshold.parse({"step": "Ready", "metric": "P99", "max_ms": 5000}, "config.yaml")
    tight = Threshold.parse({"step": "Ready", "metric": "P99", "max_ms": 40}, "config.yaml")
    assert check_thresholds(stats, [ok]) == []
    (message,) = check_thresholds(stats, [tight])
    assert "Ready" in message and "P99" in message and "51.0 ms" in message and "40 ms" in message


def test_threshold_on_a_step_without_quantiles_is_a_violation(make_run):
    submitted, sampled = make_run(jobs=10, missing_ready=3)
    stats = all_stats(job_timelines(submitted, sampled), pod_timelines(sampled))
    (message,) = check_thresholds(stats, [Threshold.parse({"step": "Ready", "metric": "P50", "max_ms": 1e9}, "c")])
    assert "no value" in message and "3 of 10" in message


@pytest.mark.parametrize(
    "raw, expected",
    [
        ({"step": "Ready", "metric": "P99"}, "needs step, metric and max_ms"),
        ({"step": "Readyy", "metric": "P99", "max_ms": 1}, "unknown step 'Readyy'"),
        ({"step": "Ready", "metric": "P42", "max_ms": 1}, "unknown metric 'P42'"),
        ({"step": "Ready", "metric": "P99", "max_ms": 1, "colour": "red"}, "unknown threshold keys"),
        ({"step": "Ready", "metric": "P99", "max_ms": "fast"}, "max_ms must be a number"),
    ],
)
def test_bad_thresholds_are_clear_errors(raw, expected):
    with pytest.raises(TopsailError, match=expected):
        Threshold.parse(raw, "suites/scale/config.yaml tests.scale.thresholds")


def test_table_columns_are_aligned(make_run):
    submitted, sampled = make_run(jobs=12, missing_ready=2)
    text = format_table(all_stats(job_timelines(submitted, sampled), pod_timelines(sampled)))
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["level", "source", "step", "P50_ms"]
    ends = {len(line) for line in lines}
    assert len(ends) == 1, "every line ends at the same column (numbers right-aligned)"
