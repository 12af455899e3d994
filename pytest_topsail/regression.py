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
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import numpy as np
import pydantic

from pytest_topsail.errors import TopsailError
from pytest_topsail.verdict_states import State

VERDICTS = tuple(state.value for state in State)  # the one vocabulary: pytest_topsail/verdict_states.py


@dataclass(frozen=True)
class KpiRule:
    """The noise floor of one KPI: a change must exceed all three to be a regression or an improvement."""

    min_magnitude: float = 0.05  # relative to the reference (0.05 = 5 %)
    noise_sigmas: float = 3.0  # times the standard deviation of the reference regime
    min_change: float = 0.0  # absolute, in the KPI's unit (e.g. a timestamp resolution)

    def floor(self, reference: float, stddev: float) -> float:
        return max(self.min_magnitude * abs(reference), self.noise_sigmas * stddev, self.min_change)



@dataclass(frozen=True)
class RegressionSettings:
    """A suite's ``regression:`` section (docs/kpis-and-regressions.md); ``kpis`` holds per-KPI noise floors
    as (name or glob pattern, rule), first match wins."""

    comparison_keys: tuple[str, ...] = ()
    ignored_keys: tuple[str, ...] = ()
    fail_on_regression: bool = False
    window_len: int = 50
    max_pvalue: float = 0.001
    min_history: int = 5
    min_magnitude: float = 0.05
    noise_sigmas: float = 3.0
    min_change: float = 0.0
    kpis: tuple[tuple[str, KpiRule], ...] = ()
    ack_file: str = "acks.yaml"
    engine: str = "auto"

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None, where: str = "regression") -> RegressionSettings:
        """Validated by type (``"false"`` is no boolean, a string is no list of keys); errors name ``where.key``."""
        if values is not None and not isinstance(values, Mapping):
            raise TopsailError(f"{where}: must be a mapping, not {type(values).__name__}")
        try:
            checked = _RegressionInput.model_validate(dict(values or {}))
        except pydantic.ValidationError as error:
            raise TopsailError(_problems(error, where)) from None
        suite_rule = KpiRule(checked.min_magnitude, checked.noise_sigmas, checked.min_change)
        rules = tuple((pattern, replace(suite_rule, **rule.model_dump(exclude_unset=True)))
                      for pattern, rule in checked.kpis.items())
        return cls(**{**checked.model_dump(exclude={"kpis"}), "comparison_keys": tuple(checked.comparison_keys),
                      "ignored_keys": tuple(checked.ignored_keys), "kpis": rules})

    def rule(self, kpi: str) -> KpiRule:
        """The noise floor of ``kpi``: the first matching entry of ``kpis``, else the suite's."""
        for pattern, rule in self.kpis:
            if fnmatch.fnmatchcase(kpi, pattern):
                return rule
        return KpiRule(self.min_magnitude, self.noise_sigmas, self.min_change)


class _KpiRuleInput(pydantic.BaseModel):
    """One entry of ``regression.kpis``: the keys given override the suite's noise floor."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)

    min_magnitude: float = pydantic.Field(0.05, ge=0)
    noise_sigmas: float = pydantic.Field(3.0, ge=0)
    min_change: float = pydantic.Field(0.0, ge=0)


class _RegressionInput(pydantic.BaseModel):
    """The ``regression:`` section as written by the user, checked strictly by type."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)

    comparison_keys: list[str] = []
    ignored_keys: list[str] = []
    fail_on_regression: bool = False
    window_len: int = pydantic.Field(50, ge=2)
    max_pvalue: float = pydantic.Field(0.001, gt=0, le=1)
    min_history: int = pydantic.Field(5, ge=1)
    min_magnitude: float = pydantic.Field(0.05, ge=0)
    noise_sigmas: float = pydantic.Field(3.0, ge=0)
    min_change: float = pydantic.Field(0.0, ge=0)
    kpis: dict[str, _KpiRuleInput] = {}
    ack_file: str = "acks.yaml"
    engine: Literal["auto", "builtin", "otava"] = "auto"


def _problems(error: pydantic.ValidationError, where: str) -> str:
    messages = []
    for problem in error.errors():
        location = ".".join(map(str, problem["loc"]))
        if problem["type"] != "extra_forbidden":
            messages.append(f"{where}.{location}: {problem['msg']}, got {problem['input']!r}")
            continue
        model = _KpiRuleInput if problem["loc"][0] == "kpis" else _RegressionInput
        messages.append(f"{where}: unknown key {location!r}; known: {', '.join(sorted(model.model_fields))}")
    return "; ".join(messages)


# ---------------------------------------------------------------- statistics


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) by its continued fraction (modified Lentz)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _incomplete_beta(b, a, 1.0 - x)
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return math.exp(log_front) * fraction / a


def t_test_pvalue(left: np.ndarray, right: np.ndarray) -> tuple[float, float, float, float, float]:
    """Two-sided pooled Student t-test on population standard deviations: (p, mean_l, mean_r, std_l, std_r)."""
    n1, n2 = len(left), len(right)
    mean_l, mean_r = float(np.mean(left)), float(np.mean(right))
    std_l = float(np.std(left)) if n1 >= 2 else 0.0
    std_r = float(np.std(right)) if n2 >= 2 else 0.0
    if n1 + n2 <= 2:
        return 1.0, mean_l, mean_r, std_l, std_r
    dof = n1 + n2 - 2
    pooled = ((n1 - 1) * std_l**2 + (n2 - 1) * std_r**2) / dof
    denominator = math.sqrt(pooled * (1.0 / n1 + 1.0 / n2))
    difference = mean_l - mean_r
    if denominator == 0.0:
        pvalue = float("nan") if difference == 0.0 else 0.0
    else:
        t = difference / denominator
        pvalue = _incomplete_beta(dof / 2.0, 0.5, dof / (dof + t * t))
    return pvalue, mean_l, mean_r, std_l, std_r


@dataclass
class ChangePoint:
    """``index`` is the first point of the new regime."""

    index: int
    qhat: float
    pvalue: float = 1.0
    mean_before: float = 0.0
    mean_after: float = 0.0
    std_before: float = 0.0
    std_after: float = 0.0

    def forward_change(self) -> float:
        return 0.0 if self.mean_before == 0 else self.mean_after / self.mean_before - 1.0

    def magnitude(self) -> float:
        backward = 0.0 if self.mean_after == 0 else self.mean_before / self.mean_after - 1.0
        return max(abs(self.forward_change()), abs(backward))


def _with_stats(point: ChangePoint, left: np.ndarray, right: np.ndarray) -> ChangePoint:
    pvalue, mean_l, mean_r, std_l, std_r = t_test_pvalue(left, right)
    return ChangePoint(point.index, point.qhat, pvalue, mean_l, mean_r, std_l, std_r)


def _intervals(indexes: Sequence[int], length: int) -> list[tuple[int, int]]:
    bounds = [0, *indexes, length]
    return [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if a != b]


def _best_split(values: np.ndarray, start: int, stop: int) -> tuple[int, float]:
    """The split maximizing the energy statistic Q(X=[start:tau], Y=[tau:kappa]) over tau and kappa."""
    z = values[start:stop]
    size = len(z)
    distances = np.abs(z[:, None] - z[None, :])
    sums = np.zeros((size + 1, size + 1))
    sums[1:, 1:] = distances.cumsum(axis=0).cumsum(axis=1)
    taus = np.arange(1, size)[:, None]
    kappas = np.arange(2, size + 1)[None, :]
    valid = kappas > taus
    kappas_c = np.where(valid, kappas, taus + 1)
    cross = sums[taus, kappas_c] - sums[taus, taus]
    within_x = sums[taus, taus] / 2.0
    within_y = (sums[kappas_c, kappas_c] - sums[taus, kappas_c] - sums[kappas_c, taus] + sums[taus, taus]) / 2.0
    n = taus.astype(float)
    m = (kappas_c - taus).astype(float)
    total = m + n
    with np.errstate(divide="ignore", invalid="ignore"):
        coef_x = np.where(n > 1, 2.0 * m / (total * (n - 1)), 0.0)
        coef_y = np.where(m > 1, 2.0 * n / (total * (m - 1)), 0.0)
    q = 2.0 / total * cross - coef_x * within_x - coef_y * within_y
    q = np.where(valid, q, -np.inf)
    row, _ = np.unravel_index(int(np.argmax(q)), q.shape)
    return start + int(row) + 1, float(q.max())


def _window_change_points(window: np.ndarray, max_pvalue: float) -> list[ChangePoint]:
    points: list[ChangePoint] = []
    while True:
        intervals = _intervals([p.index for p in points], len(window))
        candidates = [(_best_split(window, a, b), (a, b)) for a, b in intervals if b - a > 1]
        if not candidates:
            return points
        (index, qhat), (a, b) = max(candidates, key=lambda c: c[0][1])
        point = _with_stats(ChangePoint(index, qhat), window[a:index], window[index:b])
        if not point.pvalue <= max_pvalue:
            return points
        points.append(point)
        points.sort(key=lambda p: p.index)


def _restat(points: list[ChangePoint], series: np.ndarray) -> list[ChangePoint]:
    bounds = [0, *[p.index for p in points], len(series)]
    return [_with_stats(p, series[bounds[i]:p.index], series[p.index:bounds[i + 2]]) for i, p in enumerate(points)]


def _split(series: np.ndarray, window_len: int, max_pvalue: float) -> list[ChangePoint]:
    step = window_len // 2
    found: dict[int, ChangePoint] = {}
    start = 0
    while start < len(series):
        stop = min(start + window_len, len(series))
        new_points = _window_change_points(series[start:stop], max_pvalue)
        for point in new_points:
            point.index += start
            found.setdefault(point.index, point)
        last = new_points[-1].index if new_points else 0
        start = max(last, start + step)
    return _restat(sorted(found.values(), key=lambda p: p.index), series)


def _merge(points: list[ChangePoint], series: np.ndarray, max_pvalue: float, min_magnitude: float) -> list[ChangePoint]:
    while points:
        weakest = max(points, key=lambda p: p.pvalue)
        if weakest.pvalue < max_pvalue:
            weakest = min(points, key=lambda p: p.magnitude())
            if weakest.magnitude() > min_magnitude:
                return points
        position = points.index(weakest)
        del points[position]
        bounds = [0, *[p.index for p in points], len(series)]
        for i in (position, position + 1):
            if 0 <= i < len(points):
                points[i] = _with_stats(points[i], series[bounds[i]:points[i].index],
                                        series[points[i].index:bounds[i + 2]])
    return points


def builtin_change_points(series: Sequence[float], window_len: int = 50, max_pvalue: float = 0.001,
                          min_magnitude: float = 0.0) -> list[ChangePoint]:
    """Change points of ``series`` (E-divisive means + t-test, split then merge); same results as otava's."""
    values = np.asarray(series, dtype=float)
    if len(values) < 2:
        return []
    first_pass = max_pvalue * 10 if max_pvalue < 0.05 else (max_pvalue * 2 if max_pvalue < 0.5 else max_pvalue)
    return _merge(_split(values, window_len, first_pass), values, max_pvalue, min_magnitude)


def otava_available() -> bool:
    try:
        import otava.analysis  # noqa: F401
    except ImportError:
        return False
    return True


def otava_change_points(series: Sequence[float], window_len: int = 50, max_pvalue: float = 0.001,
                        min_magnitude: float = 0.0) -> list[ChangePoint]:
    from otava.analysis import compute_change_points

    points, _ = compute_change_points([float(v) for v in series], window_len=window_len, max_pvalue=max_pvalue,
                                      min_magnitude=min_magnitude)
    return [ChangePoint(int(p.index), float(p.qhat), float(p.stats.pvalue), float(p.stats.mean_1),
                        float(p.stats.mean_2), float(p.stats.std_1), float(p.stats.std_2)) for p in points]


def change_points(series: Sequence[float], settings: RegressionSettings) -> list[ChangePoint]:
    use_otava = settings.engine == "otava" or (settings.engine == "auto" and otava_available())
    if settings.engine == "otava" and not otava_available():
        raise TopsailError("regression.engine: 'otava' requested but apache-otava is not installed "
                           "(pip install 'pytest-topsail[otava]')")
    detect = otava_change_points if use_otava else builtin_change_points
    return detect(series, window_len=settings.window_len, max_pvalue=settings.max_pvalue,
                  min_magnitude=settings.min_magnitude)


# ---------------------------------------------------------------- verdicts


def history_key(labels: Mapping[str, Any], settings: RegressionSettings) -> str:
    """Labels that must match for a record to be history: all but comparison and ignored keys."""
    dropped = set(settings.comparison_keys) | set(settings.ignored_keys)
    return json.dumps({k: v for k, v in labels.items() if k not in dropped}, sort_keys=True, default=str)


def in_baseline(record: Mapping[str, Any]) -> bool:
    """A stored record is a reference unless its own verdict was a regression nobody acknowledged."""
    return record.get("verdict") != State.REGRESSION or bool(record.get("acknowledged"))


HISTORY_FIELDS = ("timestamp", "value", "test_uuid", "run_id", "git_sha", "presets", "verdict", "acknowledged")


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


def _history_entry(record: Mapping[str, Any]) -> dict[str, Any]:
    entry = {key: record.get(key) for key in HISTORY_FIELDS}
    entry["timestamp"], entry["value"] = float(record["timestamp"]), float(record["value"])
    entry["baseline"] = in_baseline(record)
    return entry


def judge(record: Mapping[str, Any], history: Sequence[Mapping[str, Any]], settings: RegressionSettings) -> Verdict:
    """Verdict for one KPI record given its history records (any order; filtered to older values here)."""
    previous = sorted(
        (h for h in history if h.get("test_uuid") != record.get("test_uuid")
         and float(h["timestamp"]) < float(record["timestamp"])),
        key=lambda h: float(h["timestamp"]))
    entries = [_history_entry(h) for h in previous]
    baseline = [e["value"] for e in entries if e["baseline"]]
    verdict = Verdict(
        suite=str(record.get("suite")), nodeid=str(record.get("nodeid")), kpi=record["name"],
        value=float(record["value"]), unit=record.get("unit", ""), higher_better=bool(record["higher_better"]),
        labels=dict(record.get("labels") or {}), status=State.ACCEPTED.value, history_size=len(baseline),
        excluded=len(entries) - len(baseline), format=record.get("format") or "{}",
        test_uuid=record.get("test_uuid"), timestamp=float(record["timestamp"]), history=entries)
    if record.get("ignored_for_regression"):
        verdict.status, verdict.method = State.IGNORED.value, "ignored for regression"
        return verdict
    if not baseline:
        verdict.status, verdict.method = State.NO_HISTORY.value, "0 comparable earlier runs"
        return verdict
    if len(baseline) < settings.min_history:
        _set_change(verdict, float(np.mean(baseline)))
        verdict.status = State.INSUFFICIENT_HISTORY.value
        verdict.method = f"{len(baseline)} of {settings.min_history} comparable runs"
        return verdict
    _judge_change_points(verdict, baseline, settings)
    return verdict


def _judge_change_points(verdict: Verdict, baseline: list[float], settings: RegressionSettings) -> None:
    rule = settings.rule(verdict.kpi)
    values = [*baseline, verdict.value]
    points = change_points(values, replace(settings, min_magnitude=rule.min_magnitude))
    verdict.change_points = [p.index for p in points]
    at_current = bool(points) and points[-1].index == len(values) - 1
    starts = [p.index for p in points if p.index < len(values) - 1]
    regime = values[(starts[-1] if starts else 0):-1]
    reference = float(np.mean(regime))
    stddev = float(np.std(regime, ddof=1)) if len(regime) > 1 else 0.0
    _set_change(verdict, reference)
    verdict.noise_floor = rule.floor(reference, stddev)
    verdict.method = "e-divisive"
    if not at_current:
        return
    verdict.pvalue = points[-1].pvalue
    delta = verdict.value - reference
    if abs(delta) > verdict.noise_floor and delta != 0:
        verdict.status = _direction(delta, verdict.higher_better)
    else:
        verdict.method = "e-divisive; change within the noise floor"


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
