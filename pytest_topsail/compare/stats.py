"""The statistics of a comparison of two runs: pure functions over arrays of raw samples (numpy, scipy).

- ``relative_difference``: the relative difference ``B / A - 1`` of a statistic (a quantile, the median, the mean)
  of two sample sets, with a bootstrap confidence interval (seeded): A and B resampled independently, the standard
  deviation of the log of the ratio of their bootstrap statistics, the interval ``(1 + r) exp(+-z sd) - 1`` (normal
  on the log scale: any confidence, 0.9999 too, from 2,000 draws, where a percentile interval would need millions
  of draws to see its tails). Quantiles use the exact bootstrap
  distribution of an order statistic (the count of resampled values at or below ``x_(j)`` is Binomial(n, j/n)), so a
  50,000-sample set costs one sort, not thousands of resamples; the mean resamples in vectorised chunks up to
  ``NORMAL_FROM`` samples, and from there draws from its bootstrap distribution's normal limit (mean, std / sqrt(n)).
- ``mann_whitney_pvalue``: the two-sided Mann-Whitney U test of the two sample sets (rank based: latencies are skewed
  and heavy tailed, which Welch's t-test, a test of means assuming them near normal, does not fit).
- ``judge``: better / worse / no significant difference, by the KPI's direction: with samples, significant when the
  interval excludes zero, the Mann-Whitney p-value is below ``1 - confidence`` (both: a tiny sample's ragged
  bootstrap alone does not decide) and the absolute change exceeds the noise floor (``regression.KpiRule.floor``:
  ``max(min_magnitude x |A|, min_change)`` between two runs); without samples, the floor alone decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

BETTER, WORSE, SAME, NOT_COMPARABLE, INFORMATIONAL = (
    "better", "worse", "no significant difference", "not comparable", "informational")
CONFIDENCE = 0.95
BOOTSTRAP_DRAWS = 2000
NORMAL_FROM = 1000  # samples from which a mean's bootstrap draws come from its normal limit (the central limit theorem)
CHUNK = 2_000_000  # resampled values per vectorised chunk of a mean's bootstrap
_QUANTILE = re.compile(r"p(\d{1,2}(?:\.\d+)?)")


def quantile_of(statistic: str) -> float | None:
    """The quantile in [0, 1] a statistic name stands for (``median`` 0.5, ``p99`` 0.99, ``min`` 0, ``max`` 1), None
    for ``mean`` (or ``avg``); a ValueError for anything else."""
    named = {"median": 0.5, "min": 0.0, "max": 1.0}
    if statistic in named:
        return named[statistic]
    if statistic in ("mean", "avg"):
        return None
    match = _QUANTILE.fullmatch(statistic)
    if match is None:
        raise ValueError(f"unknown statistic {statistic!r}: min, max, median, mean or pNN expected")
    return float(match.group(1)) / 100.0


def point_statistic(samples: np.ndarray, statistic: str) -> float:
    quantile = quantile_of(statistic)
    return float(np.mean(samples) if quantile is None else np.quantile(samples, quantile))


def bootstrap_draws(samples: np.ndarray, statistic: str, draws: int, rng: np.random.Generator) -> np.ndarray:
    """`draws` values of the statistic over bootstrap resamples of `samples` (each of their size, with replacement)."""
    quantile = quantile_of(statistic)
    if quantile is None:
        return _mean_draws(samples, draws, rng)
    ordered = np.sort(samples)
    size = len(ordered)
    rank = int(round(quantile * (size - 1)))  # the order statistic (0-based) nearest to the quantile
    # P(statistic* <= x_(j)) = P(at least rank + 1 resampled values are <= x_(j)): Binomial(size, (j + 1) / size)
    # only where it is neither 0 nor 1 to double precision: within 9 standard deviations of the binomial of the rank
    reach = int(np.ceil(9.0 * np.sqrt(size * quantile * (1.0 - quantile)))) + 2
    first, last = max(rank - reach, 0), min(rank + reach, size - 1)
    cdf = scipy_stats.binom.sf(rank, size, np.arange(first + 1, last + 2) / size)
    cdf[-1] = 1.0 if last == size - 1 else cdf[-1]
    picks = first + np.minimum(np.searchsorted(cdf, rng.random(draws), side="left"), last - first)
    return ordered[picks]


def _mean_draws(samples: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    size = len(samples)
    if size >= NORMAL_FROM:
        return rng.normal(float(np.mean(samples)), float(np.std(samples)) / np.sqrt(size), draws)
    per_chunk = max(1, CHUNK // size)
    means = [samples[rng.integers(0, size, size=(min(per_chunk, draws - done), size))].mean(axis=1)
             for done in range(0, draws, per_chunk)]
    return np.concatenate(means)


@dataclass(frozen=True)
class Difference:
    """``B / A - 1`` of a statistic (None when A's is 0), its confidence interval from the samples (None without
    samples) and the Mann-Whitney p-value of the two sample sets."""

    relative: float | None
    low: float | None = None
    high: float | None = None
    pvalue: float | None = None
    confidence: float = CONFIDENCE

    @property
    def excludes_zero(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)

    @property
    def significant(self) -> bool:
        """The interval excludes zero and the Mann-Whitney test rejects equal distributions at the same level."""
        return self.excludes_zero and self.pvalue is not None and self.pvalue < 1.0 - self.confidence


def relative_difference(a: np.ndarray, b: np.ndarray, statistic: str, *, confidence: float = CONFIDENCE,
                        draws: int = BOOTSTRAP_DRAWS, seed: int = 0) -> Difference:
    """The relative difference of `statistic` from samples `a` to samples `b`, with a bootstrap interval at
    `confidence` (A and B resampled independently, `draws` times, seeded; normal on the log scale of the ratio) and
    the Mann-Whitney p-value."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) == 0 or len(b) == 0:
        raise ValueError("two non-empty sample sets expected")
    value_a, value_b = point_statistic(a, statistic), point_statistic(b, statistic)
    pvalue = mann_whitney_pvalue(a, b)
    if value_a == 0:
        return Difference(None, pvalue=pvalue, confidence=confidence)
    rng = np.random.default_rng(seed)
    draws_a, draws_b = bootstrap_draws(a, statistic, draws, rng), bootstrap_draws(b, statistic, draws, rng)
    valid = draws_a != 0
    ratios = draws_b[valid] / draws_a[valid]
    relative = value_b / value_a - 1.0
    spread = scipy_stats.norm.ppf(1.0 - (1.0 - confidence) / 2.0)
    if relative > -1.0 and np.all(ratios > 0):  # on the log scale: a ratio's interval is not symmetric
        width = spread * float(np.std(np.log(ratios)))
        low, high = (1.0 + relative) * np.exp(-width) - 1.0, (1.0 + relative) * np.exp(width) - 1.0
    else:
        width = spread * float(np.std(ratios))
        low, high = relative - width, relative + width
    return Difference(relative, float(low), float(high), pvalue, confidence)


def mann_whitney_pvalue(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value (normal approximation with tie correction: exact for no sample size here)."""
    if np.ptp(np.concatenate([a, b])) == 0:
        return 1.0
    return float(scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue)


def judge(value_a: float, value_b: float, higher_better: bool, floor: float,
          difference: Difference | None = None) -> str:
    """better / worse / no significant difference of B against A: the change must exceed `floor` (absolute, in the
    KPI's unit) and, when the samples gave an interval, be ``significant``."""
    change = value_b - value_a
    if change == 0 or abs(change) <= floor:
        return SAME
    if difference is not None and difference.low is not None and not difference.significant:
        return SAME
    return BETTER if (change > 0) == higher_better else WORSE
