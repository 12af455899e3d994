"""Run B against run A: items matched by their case settings, every KPI of each matched pair judged
(``stats``), a pair whose labels differ beyond the suite's ``comparison_keys`` and ``ignored_keys`` not comparable
(the differing labels named), and the exit code a CI job reads."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_topsail.compare.load import Run, RunItem, item_samples, regression_settings
from pytest_topsail.compare.stats import (
    BETTER,
    CONFIDENCE,
    INFORMATIONAL,
    NOT_COMPARABLE,
    SAME,
    WORSE,
    Difference,
    judge,
    quantile_of,
    relative_difference,
)
from pytest_topsail.kpi import format_value
from pytest_topsail.regression import BUSIER, TAIL_MIN_SAMPLES, KpiRule, RegressionSettings, history_key, in_baseline

OK, REGRESSION, NO_BASELINE, ERROR = 0, 1, 2, 3  # the exit codes
VERDICTS = (WORSE, BETTER, NOT_COMPARABLE, SAME, INFORMATIONAL)


@dataclass
class Comparison:
    """One KPI of one matched item: A's and B's values, their difference and the verdict, how it was reached
    (``method``) and, for a KPI not judged or not comparable, why (``reason``)."""

    suite: str
    item: str
    kpi: str
    run_a: str
    run_b: str
    verdict: str
    value_a: float | None = None
    value_b: float | None = None
    unit: str = ""
    higher_better: bool = False
    format: str = "{}"
    difference: Difference | None = None
    method: str = ""
    reason: str = ""
    note: str = ""  # why a change beyond the floor is not significant, shown beside the verdict

    @property
    def significant(self) -> bool:
        return self.verdict in (BETTER, WORSE)

    def change_text(self) -> str:
        """``+95.6% [+88.0%, +103.1%]``, ``+4.1% (no interval)``, or the absolute change when A is 0."""
        difference = self.difference
        if difference is None:
            return ""
        if difference.relative is None:
            change = (self.value_b or 0.0) - (self.value_a or 0.0)
            return "no change" if change == 0 else f"{change:+g} {self.unit} (from 0)".replace("  ", " ")
        if difference.low is None or difference.high is None:
            return f"{difference.relative:+.1%} (no interval)"
        return f"{difference.relative:+.1%} [{difference.low:+.1%}, {difference.high:+.1%}]"

    def value_text(self, value: float | None) -> str:
        return f"{format_value(value, self.format)} {self.unit}".strip() if value is not None else "-"

    def as_dict(self) -> dict[str, Any]:
        difference = self.difference
        return {"suite": self.suite, "item": self.item, "kpi": self.kpi, "run_a": self.run_a, "run_b": self.run_b,
                "verdict": self.verdict, "value_a": self.value_a, "value_b": self.value_b, "unit": self.unit,
                "relative": difference.relative if difference else None,
                "low": difference.low if difference else None, "high": difference.high if difference else None,
                "confidence": difference.confidence if difference else None,
                "pvalue": difference.pvalue if difference else None, "method": self.method, "reason": self.reason,
                "note": self.note}


def compare_runs(runs: Sequence[Run], suites_dir: Path, confidence: float = CONFIDENCE,
                 history: Path | None = None) -> list[Comparison]:
    """Every run after the first against the first (the baseline). The intervals of the KPIs judged from samples are
    simultaneous: each at ``1 - (1 - confidence) / m`` for the m such KPIs of the comparison (Bonferroni), so the
    chance that any of them excludes zero without a real difference stays below ``1 - confidence``. `history` (a
    SQLite history file) gives the noise between runs, which the samples of one run cannot show."""
    comparisons: list[Comparison] = []
    pending: list[Pending] = []
    noise = HistoryNoise(history)
    for run in runs[1:]:
        compare_pair(runs[0], run, suites_dir, Context(comparisons, pending, noise))
    judged = sum(1 for job in pending if job.comparison.verdict != INFORMATIONAL)
    family = 1.0 - (1.0 - confidence) / max(judged, 1)
    for job in pending:
        job.finish(family if job.comparison.verdict != INFORMATIONAL else confidence, judged)
    return comparisons


class HistoryNoise:
    """The spread of a KPI between runs, from the comparable records of a history file (the regression engine's
    rules: labels equal but the comparison and ignored keys, unacknowledged regressions left out), the run judged (B)
    left out too."""

    def __init__(self, path: Path | None) -> None:
        self.path = path if path is not None and path.is_file() else None
        self.by_suite: dict[str, dict[tuple[str, str], list[tuple[str, float]]]] = {}

    def stddev(self, kpi: Mapping[str, Any], settings: RegressionSettings, runs: set[str]) -> tuple[float, int]:
        """(standard deviation, runs) of the KPI's comparable history; (0, n) with fewer than 2 runs."""
        if self.path is None:
            return 0.0, 0
        suite = str(kpi.get("suite"))
        if suite not in self.by_suite:
            self.by_suite[suite] = self._load(suite, settings)
        key = (str(kpi["name"]), history_key(kpi.get("labels") or {}, settings))
        values = [value for run, value in self.by_suite[suite].get(key, []) if run not in runs]
        return (float(np.std(values, ddof=1)) if len(values) > 1 else 0.0), len(values)

    def _load(self, suite: str, settings: RegressionSettings) -> dict[tuple[str, str], list[tuple[str, float]]]:
        from pytest_topsail.history import open_history

        assert self.path is not None
        store = open_history(self.path)
        try:
            records = store.records(suite)
        finally:
            store.close()
        found: dict[tuple[str, str], list[tuple[str, float]]] = defaultdict(list)
        for record in records:
            if in_baseline(record):
                key = (str(record["name"]), history_key(record.get("labels") or {}, settings))
                found[key].append((str(record.get("run_id")), float(record["value"])))
        return found


@dataclass
class Context:
    """Where a comparison puts its rows, its work left for the samples, and the history's noise."""

    comparisons: list[Comparison]
    pending: list[Pending]
    noise: HistoryNoise


@dataclass
class Pending:
    """A KPI whose difference comes from the samples, computed once the number of such KPIs is known."""

    comparison: Comparison
    samples_a: np.ndarray
    samples_b: np.ndarray
    statistic: str
    metric: str
    floor: float

    def finish(self, confidence: float, judged: int) -> None:
        comparison = self.comparison
        difference = relative_difference(self.samples_a, self.samples_b, self.statistic, confidence=confidence)
        if comparison.value_a and comparison.value_b is not None:  # the change of the values shown (a suite's
            # quantile may be a nearest rank where the samples' is interpolated)
            difference = dataclasses.replace(difference, relative=comparison.value_b / comparison.value_a - 1.0)
        comparison.difference = difference
        level = f"{confidence:.2%} interval" + (f" (Bonferroni over {judged} KPIs)" if judged > 1 else "")
        comparison.method = (f"bootstrap of the {self.statistic} of {len(self.samples_a)} vs {len(self.samples_b)} "
                             f"{self.metric} samples, {level}; Mann-Whitney p={difference.pvalue:.2g}")
        if comparison.verdict != INFORMATIONAL:
            assert comparison.value_a is not None and comparison.value_b is not None
            comparison.verdict = judge(comparison.value_a, comparison.value_b, comparison.higher_better, self.floor,
                                       difference)
            beyond = abs(comparison.value_b - comparison.value_a) > self.floor
            if comparison.verdict == SAME and beyond and difference.excludes_zero and difference.pvalue is not None:
                comparison.note = (f"the ranks of {len(self.samples_a)} vs {len(self.samples_b)} samples do not "
                                   f"tell them apart (Mann-Whitney p={difference.pvalue:.2g})")


def compare_pair(a: Run, b: Run, suites_dir: Path, context: Context) -> None:
    by_settings = a.has_settings and b.has_settings
    items_a = {item.key(by_settings): item for item in a.items}
    items_b = {item.key(by_settings): item for item in b.items}
    settings: dict[str, RegressionSettings] = {}
    own_runs = b.run_ids  # B is judged: the history's noise is that of the runs before it, A's included
    for key in [*items_a, *(key for key in items_b if key not in items_a)]:
        item_a, item_b = items_a.get(key), items_b.get(key)
        if item_a is None or item_b is None:
            present = item_a or item_b
            assert present is not None
            context.comparisons.append(Comparison(present.suite, present.test_id, "*", a.name, b.name,
                                                  NOT_COMPARABLE, reason=f"no such item in "
                                                  f"{b.name if item_b is None else a.name}"))
            continue
        suite = item_a.suite
        if suite not in settings:
            settings[suite] = regression_settings(suite, [a, b], suites_dir)
        compare_items(item_a, item_b, (a.name, b.name), settings[suite], suites_dir, context, own_runs)


def differing_labels(labels_a: Mapping[str, Any], labels_b: Mapping[str, Any],
                     settings: RegressionSettings) -> dict[str, tuple[Any, Any]]:
    """The labels that differ, but the suite's comparison and ignored keys (what a comparison is across)."""
    allowed = set(settings.comparison_keys) | set(settings.ignored_keys)
    return {key: (labels_a.get(key), labels_b.get(key)) for key in sorted(set(labels_a) | set(labels_b))
            if key not in allowed and labels_a.get(key) != labels_b.get(key)}


def compare_items(item_a: RunItem, item_b: RunItem, names: tuple[str, str], settings: RegressionSettings,
                  suites_dir: Path, context: Context, own_runs: set[str]) -> None:
    kpis = [*item_a.kpis, *(name for name in item_b.kpis if name not in item_a.kpis)]
    differing = differing_labels(item_a.labels, item_b.labels, settings)
    if differing:
        reason = "labels differ: " + ", ".join(f"{key} {a!r} vs {b!r}" for key, (a, b) in differing.items())
        context.comparisons.extend(Comparison(item_a.suite, item_b.test_id, name, *names, NOT_COMPARABLE,
                                              reason=reason) for name in kpis)
        return
    samples_a, samples_b = item_samples(item_a, suites_dir), item_samples(item_b, suites_dir)
    for name in kpis:
        comparison = Comparison(item_a.suite, item_b.test_id, name, *names, NOT_COMPARABLE)
        context.comparisons.append(comparison)
        kpi_a, kpi_b = item_a.kpis.get(name), item_b.kpis.get(name)
        if kpi_a is None or kpi_b is None:
            comparison.reason = f"KPI not measured in {comparison.run_a if kpi_a is None else comparison.run_b}"
            continue
        stddev, runs = context.noise.stddev(kpi_a, settings, own_runs)
        job = compare_kpi(kpi_a, kpi_b, comparison, (samples_a, samples_b), settings.rule(name), (stddev, runs),
                          settings.min_history)
        if job is not None:
            context.pending.append(job)


def compare_kpi(kpi_a: Mapping[str, Any], kpi_b: Mapping[str, Any], comparison: Comparison,
                samples: tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], rule: KpiRule,
                noise: tuple[float, int], min_history: int) -> Pending | None:
    """Fill `comparison` (NOT_COMPARABLE so far) for one KPI present in A and B: values, whether it is judged and,
    without samples, the verdict; with samples, the work left for ``Pending.finish``. `noise`: the standard
    deviation of the KPI between runs and the runs it is taken from (the history's; (0, 0) without one); a KPI
    without samples is judged from `min_history` such runs on (the suite's ``regression.min_history``)."""
    value_a, value_b = float(kpi_a["value"]), float(kpi_b["value"])
    comparison.value_a, comparison.value_b = value_a, value_b
    comparison.unit, comparison.format = str(kpi_b.get("unit") or ""), str(kpi_b.get("format") or "{}")
    comparison.higher_better = bool(kpi_b.get("higher_better"))
    stddev, runs = noise
    floor = rule.floor(value_a, stddev)
    comparison.reason = not_judged(kpi_a, kpi_b) or other_contention(kpi_a, kpi_b)
    comparison.verdict = INFORMATIONAL if comparison.reason else SAME
    if not comparison.reason:
        comparison.reason = rule.explain(value_a, stddev, runs, comparison.unit) if runs > 1 else \
            f"noise floor {format_value(floor, comparison.format)} {comparison.unit}".strip() + \
            " (no history: the noise between runs unknown)"
    sampled = sample_statistic(comparison.kpi, samples[0].keys() & samples[1].keys())
    if sampled is not None:
        metric, statistic = sampled
        return Pending(comparison, samples[0][metric], samples[1][metric], statistic, metric, floor)
    comparison.difference = Difference(value_b / value_a - 1.0 if value_a else None)
    comparison.method = "values only: the runs kept no raw samples of this KPI"
    if comparison.verdict == INFORMATIONAL:
        return None
    if runs >= min_history:
        comparison.verdict = judge(value_a, value_b, comparison.higher_better, floor)
    else:
        comparison.verdict = INFORMATIONAL
        comparison.reason = (f"informational: no raw samples, and {runs} of the {min_history} comparable runs in the "
                             "history needed to tell its change from the noise between runs")
    return None


def sample_statistic(kpi: str, metrics: Iterable[str]) -> tuple[str, str] | None:
    """(metric, statistic) when the KPI is named ``<metric>_<statistic>[_<unit>]`` after a sampled metric, or
    (kpi, ``mean``) for samples named as the KPI itself: per-step values whose mean the KPI is or is proportional to
    (fine_tuning's tokens/s and step seconds per logged step)."""
    if kpi in metrics:
        return kpi, "mean"
    for metric in sorted(metrics, key=len, reverse=True):
        if kpi.startswith(f"{metric}_"):
            statistic = kpi[len(metric) + 1:].split("_")[0]
            try:
                quantile_of(statistic)
            except ValueError:
                continue
            return metric, statistic
    return None


def not_judged(kpi_a: Mapping[str, Any], kpi_b: Mapping[str, Any]) -> str:
    """Why the KPI is informational, as the history judges it ('' when it is judged): declared
    ``ignored_for_regression``, or taken from fewer samples than its ``min_samples`` in either run."""
    untrusted = kpi_b.get("untrusted") or kpi_a.get("untrusted")
    if untrusted:  # the measurement says it cannot be trusted (e.g. a saturated load client): as the history does
        return f"informational: not judged: {untrusted}"
    if kpi_a.get("ignored_for_regression") or kpi_b.get("ignored_for_regression"):
        return f"informational: {kpi_b.get('why') or 'declared ignored_for_regression'}"
    for kpi in (kpi_a, kpi_b):
        samples, minimum = kpi.get("samples"), kpi.get("min_samples") or TAIL_MIN_SAMPLES
        if samples is not None and samples < minimum:
            return f"informational: taken from {samples:g} samples, judged from {minimum:g} on"
    return ""


def other_contention(kpi_a: Mapping[str, Any], kpi_b: Mapping[str, Any]) -> str:
    """Why a ``machine_bound`` KPI (made of this machine's own work) is not judged ('' when it is): A and B ran at
    contentions ``regression.BUSIER`` times apart, with more runnable tasks than CPUs on the busier side."""
    load_a, load_b = kpi_a.get("machine_load"), kpi_b.get("machine_load")
    if not (kpi_a.get("machine_bound") or kpi_b.get("machine_bound")) or load_a is None or load_b is None:
        return ""
    busier, quieter = max(load_a, load_b), min(load_a, load_b)
    if busier > max(1.0, BUSIER * quieter):
        return (f"informational: made of this machine's own work (machine_bound), measured at {load_a:.2f} and "
                f"{load_b:.2f} runnable tasks per CPU")
    return ""


def exit_code(comparisons: Sequence[Comparison]) -> int:
    """1 when a KPI is significantly worse; else 2 when nothing was compared or a pair was not comparable; else 0."""
    if any(c.verdict == WORSE for c in comparisons):
        return REGRESSION
    if not any(c.verdict in (BETTER, SAME) for c in comparisons) or any(c.verdict == NOT_COMPARABLE
                                                                       for c in comparisons):
        return NO_BASELINE
    return OK


def counts(comparisons: Sequence[Comparison]) -> dict[str, int]:
    return {verdict: sum(c.verdict == verdict for c in comparisons) for verdict in VERDICTS}


def summary_line(comparisons: Sequence[Comparison]) -> str:
    """``compare: 8 worse, 0 better, 40 no significant difference, 0 not comparable (254 informational)``."""
    counted = counts(comparisons)
    judged = ", ".join(f"{counted[v]} {v}" for v in (WORSE, BETTER, SAME, NOT_COMPARABLE))
    return f"compare: {judged} ({counted[INFORMATIONAL]} informational)"
