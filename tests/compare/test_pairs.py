"""How one KPI of a matched pair is judged (pytest_topsail/compare/pairs.py): an untrusted measurement is
informational as in the history verdicts, even with samples that differ; samples named as the KPI itself are
bootstrapped by their mean."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_topsail.compare.pairs import Comparison, compare_kpi, sample_statistic
from pytest_topsail.compare.stats import INFORMATIONAL, NOT_COMPARABLE, WORSE
from pytest_topsail.regression import KpiRule

RNG = np.random.default_rng(7)
SLOW = {"ttft": RNG.normal(200.0, 5.0, 400)}
FAST = {"ttft": RNG.normal(100.0, 5.0, 400)}


def judged(kpi_b: dict[str, Any]) -> Comparison:
    kpi_a = {"name": "ttft_median_ms", "value": 100.0, "unit": "ms", "higher_better": False}
    comparison = Comparison("llm_load", "test_llm_load[x]", "ttft_median_ms", "a", "b", NOT_COMPARABLE)
    pending = compare_kpi(kpi_a, kpi_b, comparison, (FAST, SLOW), KpiRule(), (0.0, 0), 5)
    assert pending is not None  # the samples decide the interval
    pending.finish(0.95, 1)
    return comparison


def test_a_doubled_median_from_samples_is_worse() -> None:
    comparison = judged({"name": "ttft_median_ms", "value": 200.0, "unit": "ms", "higher_better": False})
    assert comparison.verdict == WORSE
    assert comparison.difference is not None and comparison.difference.low is not None
    assert comparison.difference.low > 0.8


def test_an_untrusted_measurement_is_informational_and_says_why() -> None:
    comparison = judged({"name": "ttft_median_ms", "value": 200.0, "unit": "ms", "higher_better": False,
                         "untrusted": "the load client was saturated"})
    assert comparison.verdict == INFORMATIONAL
    assert comparison.reason == "informational: not judged: the load client was saturated"
    assert comparison.difference is not None and comparison.difference.low is not None  # the interval still shown


def test_samples_named_as_the_kpi_are_bootstrapped_by_their_mean() -> None:
    assert sample_statistic("train_tokens_per_second", {"train_tokens_per_second", "train_runtime"}) == (
        "train_tokens_per_second", "mean")
    assert sample_statistic("ttft_p99_ms", {"ttft", "itl"}) == ("ttft", "p99")
    assert sample_statistic("train_runtime_total", {"train_runtime"}) is None  # 'total' is no statistic
