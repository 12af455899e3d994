"""The statistics of a comparison on synthetic samples with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_topsail.compare.stats import (
    BETTER,
    SAME,
    WORSE,
    Difference,
    bootstrap_draws,
    judge,
    mann_whitney_pvalue,
    quantile_of,
    relative_difference,
)


def lognormal(seed: int, size: int, scale: float = 1.0) -> np.ndarray:
    return scale * np.random.default_rng(seed).lognormal(0.0, 0.5, size)


@pytest.mark.parametrize("statistic", ["median", "p99", "mean"])
def test_identical_distributions_show_no_difference_in_at_least_95_percent_of_seeded_trials(statistic: str) -> None:
    trials = 200
    verdicts = []
    for trial in range(trials):
        a, b = lognormal(2 * trial, 300), lognormal(2 * trial + 1, 300)
        difference = relative_difference(a, b, statistic, seed=trial, draws=2000)
        verdicts.append(judge(float(np.mean(a)), float(np.mean(b)), False, floor=0.0, difference=difference))
    assert verdicts.count(SAME) >= 0.95 * trials


def test_a_known_shift_is_found_with_an_interval_around_it() -> None:
    a, b = lognormal(1, 2000), lognormal(2, 2000, scale=1.2)  # every quantile 20 % higher
    for statistic in ("median", "p90", "mean"):
        difference = relative_difference(a, b, statistic)
        assert difference.low is not None and difference.high is not None
        assert 0.0 < difference.low < 0.2 < difference.high, (statistic, difference)
        assert difference.relative == pytest.approx(0.2, abs=0.06)
        assert difference.significant and difference.pvalue is not None and difference.pvalue < 1e-10


def test_the_point_estimate_is_the_statistic_of_the_samples() -> None:
    a, b = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 4.0, 6.0, 8.0])
    assert relative_difference(a, b, "median").relative == pytest.approx(1.0)
    assert relative_difference(a, b, "mean").relative == pytest.approx(1.0)
    assert relative_difference(np.zeros(3), b, "median").relative is None  # no relative change from 0


def test_the_exact_quantile_bootstrap_matches_resampling() -> None:
    samples = lognormal(3, 101)
    rng = np.random.default_rng(0)
    exact = bootstrap_draws(samples, "p90", 20000, rng)
    resampled = np.array([np.sort(samples[rng.integers(0, 101, 101)])[90] for _ in range(20000)])
    assert np.quantile(exact, [0.05, 0.5, 0.95]) == pytest.approx(np.quantile(resampled, [0.05, 0.5, 0.95]),
                                                                  rel=0.02)


def test_the_mean_bootstrap_spread_is_the_standard_error_below_and_above_the_normal_limit() -> None:
    for size in (500, 5000):
        samples = lognormal(4, size)
        draws = bootstrap_draws(samples, "mean", 4000, np.random.default_rng(0))
        assert np.std(draws) == pytest.approx(np.std(samples) / np.sqrt(size), rel=0.1)


def test_seeded_intervals_repeat() -> None:
    a, b = lognormal(5, 300), lognormal(6, 300)
    assert relative_difference(a, b, "p99", seed=7) == relative_difference(a, b, "p99", seed=7)


def test_statistic_names() -> None:
    assert [quantile_of(s) for s in ("median", "min", "max", "p99", "p99.9", "mean", "avg")] == [
        0.5, 0.0, 1.0, 0.99, pytest.approx(0.999), None, None]
    with pytest.raises(ValueError, match="unknown statistic 'average'"):
        quantile_of("average")


def test_mann_whitney_of_equal_constants_is_one() -> None:
    assert mann_whitney_pvalue(np.ones(5), np.ones(7)) == 1.0


def test_the_verdict_honours_the_direction_the_floor_and_the_interval() -> None:
    up = Difference(0.5, 0.4, 0.6, pvalue=1e-6)
    assert judge(10.0, 15.0, higher_better=False, floor=0.0, difference=up) == WORSE
    assert judge(10.0, 15.0, higher_better=True, floor=0.0, difference=up) == BETTER
    assert judge(10.0, 15.0, higher_better=False, floor=6.0, difference=up) == SAME  # min_change not exceeded
    straddling = Difference(0.5, -0.1, 0.9, pvalue=1e-6)
    assert judge(10.0, 15.0, higher_better=False, floor=0.0, difference=straddling) == SAME
    ranks_agree_not = Difference(0.5, 0.4, 0.6, pvalue=0.2)  # a ragged bootstrap of 3 samples: the test decides too
    assert judge(10.0, 15.0, higher_better=False, floor=0.0, difference=ranks_agree_not) == SAME
    assert judge(10.0, 15.0, higher_better=False, floor=1.0) == WORSE  # no samples: the floor alone
    assert judge(10.0, 10.0, higher_better=False, floor=0.0) == SAME
