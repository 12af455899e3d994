"""Regression verdicts of KPI values against their history.

The rules (docs/kpis-and-regressions.md):
- history: earlier records of the same suite and KPI whose labels equal the current ones except the suite's
  comparison and ignored keys;
- baseline: that history minus the records whose own verdict was a regression and that nobody acknowledged
  (``python -m pytest_topsail.history ack`` or the suite's ack file), so a regression never becomes the reference
  by itself;
- fewer than ``min_history`` (N, default 5) baseline points: ``insufficient_history``, never a regression;
- otherwise change points of the baseline followed by the current value (E-divisive means + Student t-test,
  Hunter / Apache Otava semantics); when the last change point is the current value and the change exceeds the
  noise floor ``max(min_magnitude x |reference|, noise_sigmas x stddev of the reference regime, min_change)``,
  the verdict is a regression or an improvement by the KPI's direction; otherwise ``accepted``.
A zero reference has no relative change: the change is given in the KPI's unit.
``apache-otava`` computes the change points when installed and ``engine`` is ``auto`` or ``otava``.
"""

from __future__ import annotations

import fnmatch
import gc
import json
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import pydantic

from pytest_topsail.changepoints import (
    ChangePoint,
    builtin_change_points,
    builtin_change_points_many,
    otava_available,
    otava_change_points,
    t_test_pvalue,
    t_tests,
)
from pytest_topsail.errors import TopsailError
from pytest_topsail.settings import Settings, validate
from pytest_topsail.verdict_states import State

__all__ = ["ChangePoint", "builtin_change_points", "otava_change_points", "t_test_pvalue"]

VERDICTS = tuple(state.value for state in State)  # the one vocabulary: pytest_topsail/verdict_states.py


class KpiRule(Settings):
    """The noise floor of one KPI: a change must exceed all three to be a regression or an improvement. As an entry
    of ``regression.kpis``, the keys given override the suite's."""

    model_config = pydantic.ConfigDict(frozen=True)

    min_magnitude: float = pydantic.Field(0.05, ge=0)  # relative to the reference (0.05 = 5 %)
    noise_sigmas: float = pydantic.Field(3.0, ge=0)  # times the standard deviation of the reference regime
    min_change: float = pydantic.Field(0.0, ge=0)  # absolute, in the KPI's unit (e.g. a timestamp resolution)

    def floor(self, reference: float, stddev: float) -> float:
        return max(self.min_magnitude * abs(reference), self.noise_sigmas * stddev, self.min_change)

    def explain(self, reference: float, stddev: float, runs: int, unit: str) -> str:
        """The noise floor in words: ``noise floor 5.3 ms, the largest of 5% of the reference 55.8 ms (2.8 ms),
        3 x the stddev 1.8 ms of its 5 runs (5.3 ms) and min_change 0 ms``."""
        def amount(value: float) -> str:
            return f"{value:.3g} {unit}".strip()

        parts = [f"{self.min_magnitude:.0%} of the reference {amount(reference)} "
                 f"({amount(self.min_magnitude * abs(reference))})",
                 f"{self.noise_sigmas:g} x the stddev {amount(stddev)} of its {runs} runs "
                 f"({amount(self.noise_sigmas * stddev)})",
                 f"min_change {amount(self.min_change)}"]
        return (f"noise floor {amount(self.floor(reference, stddev))}, the largest of {', '.join(parts[:2])} "
                f"and {parts[2]}")


class RegressionSettings(Settings):
    """A suite's ``regression:`` section (docs/kpis-and-regressions.md), checked strictly by type (``"false"`` is
    no boolean, a string is no list of keys); ``kpis`` holds per-KPI noise floors by name or glob pattern, first
    match wins."""

    model_config = pydantic.ConfigDict(frozen=True)

    comparison_keys: list[str] = []
    ignored_keys: list[str] = []
    fail_on_regression: bool = False
    window_len: int = pydantic.Field(50, ge=2)
    max_pvalue: float = pydantic.Field(0.001, gt=0, le=1)
    min_history: int = pydantic.Field(5, ge=1)
    min_magnitude: float = pydantic.Field(0.05, ge=0)
    noise_sigmas: float = pydantic.Field(3.0, ge=0)
    min_change: float = pydantic.Field(0.0, ge=0)
    kpis: dict[str, KpiRule] = {}
    ack_file: str = "acks.yaml"
    engine: Literal["auto", "builtin", "otava"] = "auto"

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None, where: str = "regression") -> RegressionSettings:
        """The validated section; `where` is ``<file>: regression`` (a TopsailError naming each key
        ``regression.<key>`` otherwise)."""
        if values is not None and not isinstance(values, Mapping):
            raise TopsailError(f"{where}: must be a mapping, not {type(values).__name__}")
        return validate(cls, dict(values or {}), where, "invalid regression settings")

    def rule(self, kpi: str) -> KpiRule:
        """The noise floor of ``kpi``: the suite's, with the keys of the first matching entry of ``kpis``."""
        suite = KpiRule(min_magnitude=self.min_magnitude, noise_sigmas=self.noise_sigmas, min_change=self.min_change)
        for pattern, rule in self.kpis.items():
            if fnmatch.fnmatchcase(kpi, pattern):
                return suite.model_copy(update=rule.model_dump(exclude_unset=True))
        return suite


def _use_otava(settings: RegressionSettings) -> bool:
    if settings.engine == "otava" and not otava_available():
        raise TopsailError("regression.engine: 'otava' requested but apache-otava is not installed "
                           "(pip install 'pytest-topsail[otava]')")
    return settings.engine == "otava" or (settings.engine == "auto" and otava_available())


def change_points_many(series: Sequence[Sequence[float]], settings: RegressionSettings,
                       min_magnitudes: Sequence[float] | None = None) -> list[list[ChangePoint]]:
    """Change points of many series at once (the built-in engine batches them; otava takes one at a time)."""
    magnitudes = list(min_magnitudes) if min_magnitudes is not None else [settings.min_magnitude] * len(series)
    if _use_otava(settings):
        return [otava_change_points(s, window_len=settings.window_len, max_pvalue=settings.max_pvalue,
                                    min_magnitude=m) for s, m in zip(series, magnitudes, strict=True)]
    return builtin_change_points_many(series, window_len=settings.window_len, max_pvalue=settings.max_pvalue,
                                      min_magnitude=magnitudes)


def change_points(series: Sequence[float], settings: RegressionSettings) -> list[ChangePoint]:
    return change_points_many([series], settings)[0]


# ---------------------------------------------------------------- verdicts


def history_key(labels: Mapping[str, Any], settings: RegressionSettings) -> str:
    """Labels that must match for a record to be history: all but comparison and ignored keys."""
    dropped = set(settings.comparison_keys) | set(settings.ignored_keys)
    return json.dumps({k: v for k, v in labels.items() if k not in dropped}, sort_keys=True, default=str)


def once_per_scope(entries: Sequence[dict[str, Any]], seen: set[str]) -> tuple[list[dict[str, Any]],
                                                                                list[dict[str, Any]]]:
    """Split an item's KPI records into those to judge, store and show, and the ``worker``/``run`` scoped ones
    an earlier item of the run already recorded (same suite, KPI and labels): a measurement is judged once where
    it happens, not once per item that shares it. ``seen`` keeps the scope keys of the run."""
    kept: list[dict[str, Any]] = []
    shared: list[dict[str, Any]] = []
    for entry in entries:
        scope = entry.get("scope") or "item"
        if scope == "item":
            kept.append(entry)
            continue
        key = json.dumps([entry.get("suite"), scope, entry["name"], entry.get("labels")], sort_keys=True, default=str)
        (shared if key in seen else kept).append(entry)
        seen.add(key)
    return kept, shared


def in_baseline(record: Mapping[str, Any]) -> bool:
    """A stored record is a reference unless its own verdict was a regression nobody acknowledged."""
    return record.get("verdict") != State.REGRESSION or bool(record.get("acknowledged"))


_TIMESTAMP = operator.itemgetter("timestamp")
TAIL_MIN_SAMPLES = 100  # default: a rate (or a statistic) of fewer samples moves with one of them
HISTORY_FIELDS = ("timestamp", "value", "test_uuid", "run_id", "git_sha", "presets", "verdict", "acknowledged",
                  "machine_load")
BUSIER = 1.25  # a machine_bound change is not judged at this factor more (or less) contention than its baseline had


@dataclass
class Verdict:
    suite: str
    nodeid: str
    kpi: str
    value: float
    unit: str
    higher_better: bool
    labels: dict[str, Any]
    status: str
    change_percent: float | None = None  # None when the reference is 0: see change_absolute
    change_absolute: float | None = None  # value - reference, in the KPI's unit
    pvalue: float | None = None
    history_size: int = 0  # baseline points the value was judged against
    excluded: int = 0  # earlier records left out of the baseline: unacknowledged regressions
    reference: float | None = None
    noise_floor: float | None = None  # the absolute change needed for a regression or an improvement
    method: str = ""
    format: str = "{}"
    test_uuid: str | None = None
    timestamp: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)  # the history, oldest first (HISTORY_FIELDS)
    change_points: list[int] = field(default_factory=list)  # indexes into the baseline + [current]
    scope: str = "item"  # where the KPI is measured: item, worker or run (kpi.SCOPES); judged once per scope key
    explanation: str = ""  # why this verdict: the noise floor and how it was derived, or why not judged
    machine_bound: bool = False  # made of this machine's own work: judged only at a contention like its baseline's
    machine_load: float | None = None  # runnable tasks per CPU during the test (pytest_topsail.contention)

    def as_dict(self, with_history: bool = False) -> dict[str, Any]:
        data = asdict(self)
        if not with_history:
            data.pop("history")
            data.pop("change_points")
        return data

    def change_text(self, digits: int = 1) -> str:
        """``-31.2%``, or the absolute change in the KPI's unit when the reference is 0."""
        if self.change_percent is not None:
            return f"{self.change_percent:+.{digits}f}%"
        if self.change_absolute == 0:
            return "no change"
        if self.change_absolute is not None:
            return f"{self.change_absolute:+g} {self.unit} (from 0)".replace("  ", " ")
        return ""

    def describe(self) -> str:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        change = f" {self.change_text()}" if self.change_text() else ""
        pvalue = "" if self.pvalue is None else f" p={self.pvalue:.2g}"
        return (f"{self.suite} {self.kpi}={self.value:g} {self.unit}{change}{pvalue} vs {self.history_size} "
                f"previous ({labels}) [{self.nodeid}]")


def _direction(delta: float, higher_better: bool) -> str:
    worse = delta < 0 if higher_better else delta > 0
    return State.REGRESSION.value if worse else State.IMPROVEMENT.value


def _set_change(verdict: Verdict, reference: float) -> None:
    verdict.reference = reference
    verdict.change_absolute = verdict.value - reference
    verdict.change_percent = (verdict.value / reference - 1.0) * 100.0 if reference != 0 else None


_REGRESSION = State.REGRESSION.value  # read once: an enum member's lookup costs in a loop over every history record


def _history_entry(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record as the report's trends show it (HISTORY_FIELDS and whether it is in the baseline)."""
    get = record.get
    verdict, acknowledged = get("verdict"), get("acknowledged")
    return {"timestamp": float(record["timestamp"]), "value": float(record["value"]), "test_uuid": get("test_uuid"),
            "run_id": get("run_id"), "git_sha": get("git_sha"), "presets": get("presets"), "verdict": verdict,
            "acknowledged": acknowledged,
            "baseline": (verdict != _REGRESSION or bool(acknowledged)) and not get("untrusted"),
            "machine_load": get("machine_load")}


def judge(record: Mapping[str, Any], history: Sequence[Mapping[str, Any]], settings: RegressionSettings) -> Verdict:
    """Verdict for one KPI record given its history records (any order; filtered to older values here)."""
    return judge_many([(record, history)], settings)[0]


def judge_many(pairs: Sequence[tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]]],
               settings: RegressionSettings) -> list[Verdict]:
    """Verdicts of many (record, history) pairs of one suite; the change points of all series computed together."""
    with _collector_paused():
        return _judge_many(pairs, settings)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a batch builds its history entries (a dict per earlier record, 100,000
    for 1,000 KPIs of 100 runs): none of them is in a cycle, yet each collection would walk them all again
    (a sixth of judge_many's time on benchmarks/report_regression.py)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _judge_many(pairs: Sequence[tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]]],
                settings: RegressionSettings) -> list[Verdict]:
    verdicts, pending = [], []
    for record, history in pairs:
        verdict, baseline = _prepare(record, history, settings)
        verdicts.append(verdict)
        if baseline is not None:
            pending.append((verdict, baseline))
    known: dict[str, KpiRule] = {}  # a KPI's rule is made once (a pydantic model per call costs)
    rules = [known.get(v.kpi) or known.setdefault(v.kpi, settings.rule(v.kpi)) for v, _ in pending]
    series = [[*baseline, verdict.value] for verdict, baseline in pending]
    found = change_points_many(series, settings, [rule.min_magnitude for rule in rules])
    found = _with_current(series, found, settings.max_pvalue)
    for (verdict, _), values, rule, points in zip(pending, series, rules, found, strict=True):
        _judge_change_points(verdict, values, rule, points)
    return verdicts


def _with_current(series: list[list[float]], found: list[list[ChangePoint]],
                  max_pvalue: float) -> list[list[ChangePoint]]:
    """The change points of each series, with one at the current value when E-divisive put none there but the
    value stands apart from its regime (the current run against the runs since the last change point: Student's
    t-test, p below ``max_pvalue``; the t-tests of all series in one batch). E-divisive splits a series where the
    whole of it divides best: a single earlier run a little apart can take the split (ITL medians 26.8, 26.6, 26.8,
    26.6, 28.0, then 106.3 ms: it split before 28.0, whose t-test then failed on the 28-and-106 side), and a
    fourfold change at the current value went unseen."""
    tested: list[int] = []
    requests: list[tuple[np.ndarray, int, int, int]] = []
    for position, (values, points) in enumerate(zip(series, found, strict=True)):
        last = len(values) - 1
        start = points[-1].index if points else 0
        if (points and points[-1].index == last) or last - start < 2:
            continue
        tested.append(position)
        requests.append((np.array(values[start:]), 0, last - start, last - start + 1))
    result = list(found)
    for position, row in zip(tested, t_tests(requests), strict=True):
        pvalue, mean_before, mean_after, std_before, std_after = (float(v) for v in row)
        if pvalue < max_pvalue:
            result[position] = [*found[position], ChangePoint(
                len(series[position]) - 1, qhat=0.0, pvalue=pvalue, mean_before=mean_before, mean_after=mean_after,
                std_before=std_before, std_after=std_after)]
    return result


def _prepare(record: Mapping[str, Any], history: Sequence[Mapping[str, Any]],
             settings: RegressionSettings) -> tuple[Verdict, list[float] | None]:
    """The verdict as far as it goes without change points, and the baseline when change points decide."""
    timestamp, test_uuid = float(record["timestamp"]), record.get("test_uuid")
    entries = [_history_entry(h) for h in history
               if h.get("test_uuid") != test_uuid and float(h["timestamp"]) < timestamp]
    entries.sort(key=_TIMESTAMP)
    baseline = [e["value"] for e in entries if e["baseline"]]
    verdict = Verdict(
        suite=str(record.get("suite")), nodeid=str(record.get("nodeid")), kpi=record["name"],
        value=float(record["value"]), unit=record.get("unit", ""), higher_better=bool(record["higher_better"]),
        labels=dict(record.get("labels") or {}), status=State.ACCEPTED.value, history_size=len(baseline),
        excluded=len(entries) - len(baseline), format=record.get("format") or "{}",
        test_uuid=test_uuid, timestamp=timestamp, history=entries, scope=record.get("scope") or "item",
        machine_bound=bool(record.get("machine_bound")), machine_load=record.get("machine_load"))
    samples = record.get("samples")
    if record.get("excluded"):  # measured through a fault (KpiRecorder.exclude): never a history point
        verdict.status, verdict.method = State.IGNORED.value, "excluded from history"
        verdict.explanation = f"excluded from history: {record['excluded']}"
    elif record.get("untrusted"):  # the measurement says it cannot be trusted (e.g. a saturated load client)
        verdict.status, verdict.method = State.IGNORED.value, "untrusted measurement"
        verdict.explanation = f"not judged: {record['untrusted']}"
    elif record.get("ignored_for_regression"):
        verdict.status, verdict.method = State.IGNORED.value, "informational"
        verdict.explanation = f"informational: {record.get('why') or 'declared ignored_for_regression'}"
    elif samples is not None and samples < (minimum := record.get("min_samples") or TAIL_MIN_SAMPLES):
        verdict.status, verdict.method = State.IGNORED.value, "informational (small sample)"
        verdict.explanation = (f"informational: taken from {samples:g} samples, judged from {minimum:g} on "
                               "(a tail or a rate of a few samples moves with one of them)")
    elif not baseline:
        verdict.status, verdict.method = State.NO_HISTORY.value, "0 comparable earlier runs"
    elif len(baseline) < settings.min_history:
        _set_change(verdict, float(np.mean(baseline)))
        verdict.status = State.INSUFFICIENT_HISTORY.value
        verdict.method = f"{len(baseline)} of {settings.min_history} comparable runs"
    else:
        return verdict, baseline
    return verdict, None


def _judge_change_points(verdict: Verdict, values: list[float], rule: KpiRule, points: list[ChangePoint]) -> None:
    verdict.change_points = [p.index for p in points]
    at_current = bool(points) and points[-1].index == len(values) - 1
    starts = [p.index for p in points if p.index < len(values) - 1]
    regime = values[(starts[-1] if starts else 0):-1]
    regime_values = np.array(regime)  # once for both
    reference = float(regime_values.mean())
    stddev = float(regime_values.std(ddof=1)) if len(regime) > 1 else 0.0
    _set_change(verdict, reference)
    verdict.noise_floor = rule.floor(reference, stddev)
    verdict.explanation = rule.explain(reference, stddev, len(regime), verdict.unit)
    verdict.method = "e-divisive"
    if not at_current:
        verdict.explanation = f"no change point at this value; {verdict.explanation}"
        return
    verdict.pvalue = points[-1].pvalue
    delta = verdict.value - reference
    if abs(delta) > verdict.noise_floor and delta != 0:
        verdict.status = _direction(delta, verdict.higher_better)
        verdict.explanation = f"change {delta:+.3g} {verdict.unit} beyond the {verdict.explanation}"
        loads = [e["machine_load"] for e in verdict.history if e["baseline"]][len(values) - 1 - len(regime):]
        excuse = _other_machine(verdict, loads)
        if excuse:
            verdict.status, verdict.method = State.IGNORED.value, "machine contention unlike its baseline's"
            verdict.explanation = (f"not judged: {verdict.explanation}; but {excuse}: a KPI made of this machine's "
                                   "own work (machine_bound) is not compared across such different contention")
    else:
        verdict.method = "e-divisive; change within the noise floor"
        verdict.explanation = f"change {delta:+.3g} {verdict.unit} within the {verdict.explanation}"


def _other_machine(verdict: Verdict, loads: Sequence[float | None]) -> str:
    """Why a machine_bound change cannot be told from the machine's contention ('' when it can): the test ran
    with BUSIER times the contention of every run of its reference regime (a regression), or 1/BUSIER (an
    improvement), and with more runnable tasks than CPUs on the busier side (below that, nothing waits)."""
    known = [load for load in loads if load is not None]
    current = verdict.machine_load
    if not verdict.machine_bound or current is None or not known:
        return ""
    if verdict.status == State.REGRESSION and current > max(1.0, BUSIER * max(known)):
        return (f"the machine was busier during this test ({current:.2f} runnable tasks per CPU) than during any "
                f"of its {len(known)} reference runs (at most {max(known):.2f})")
    if verdict.status == State.IMPROVEMENT and min(known) > max(1.0, BUSIER * current):
        return (f"the machine was quieter during this test ({current:.2f} runnable tasks per CPU) than during any "
                f"of its {len(known)} reference runs (at least {min(known):.2f})")
    return ""


def summarize(verdicts: Iterable[Verdict], total_points: int) -> dict[str, Any]:
    """Counts for regression_summary.yaml: ``verdicts`` counts each state by its one name (verdict_states.py);
    ``failures`` and ``significant_performance_*`` keep MatrixBenchmarking's names for the regression and
    improvement counts; improvements are never failures."""
    verdicts = list(verdicts)
    counts = {status: sum(v.status == status for v in verdicts) for status in VERDICTS}
    entries = {(v.suite, v.nodeid) for v in verdicts}
    summary: dict[str, Any] = {
        "total_points": total_points,
        "entries_count": len(entries),
        "kpis_count": len(verdicts),
        "verdicts": counts,
        "failures": counts[State.REGRESSION],
        "significant_performance_increase": counts[State.IMPROVEMENT],
        "significant_performance_decrease": counts[State.REGRESSION],
        "excluded_from_baseline": sum(v.excluded for v in verdicts),
    }
    summary["message"] = verdict_line(counts)
    summary["regressions"] = [v.describe() for v in verdicts if v.status == State.REGRESSION]
    return summary


def verdict_line(counts: Mapping[str, int]) -> str:
    """``2 KPI regressions``, ``no regression; 3 improvements``, ``no regression``; ``no verdict: ...`` when no
    KPI could be judged (every one without enough comparable history, or ignored)."""
    regressions, improvements = counts.get(State.REGRESSION, 0), counts.get(State.IMPROVEMENT, 0)
    if regressions:
        text = f"{regressions} KPI regression{'s' if regressions != 1 else ''}"
        return text + (f", {improvements} improvement{'s' if improvements != 1 else ''}" if improvements else "")
    if improvements:
        return f"no regression; {improvements} improvement{'s' if improvements != 1 else ''}"
    if not counts.get(State.ACCEPTED, 0):
        return NO_VERDICT
    return "no regression"


NO_VERDICT = "no verdict: not enough comparable history yet"
