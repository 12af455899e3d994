"""Change-point regression verdicts against KPI history.

Method (Hunter / Apache Otava semantics): E-divisive means over sliding windows, each candidate accepted by a
two-sided Student t-test (pooled variance), weak change points found at a relaxed p-value then merged away
bottom-up. The series is the KPI's history (same labels except the suite's comparison and ignored keys) followed
by the current value; when the last change point is the current value, the verdict is a regression or an
improvement depending on the KPI's direction, otherwise accepted.

Short history (fewer than ``min_history`` previous values): the t-test has no power, so the current value is
compared with the mean of the history and a change beyond ``short_history_threshold`` percent counts.
``apache-otava`` is used for the change points when it is installed and ``engine`` is ``auto`` or ``otava``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import pydantic

from pytest_topsail.errors import TopsailError

VERDICTS = ("accepted", "regression", "improvement", "no_history", "ignored")


@dataclass(frozen=True)
class RegressionSettings:
    comparison_keys: tuple[str, ...] = ()
    ignored_keys: tuple[str, ...] = ()
    fail_on_regression: bool = False
    window_len: int = 50
    max_pvalue: float = 0.001
    min_magnitude: float = 0.0
    min_history: int = 5
    short_history_threshold: float = 10.0
    engine: str = "auto"

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None, where: str = "regression") -> RegressionSettings:
        """Validated by type (``"false"`` is no boolean, a string is no list of keys); errors name ``where.key``."""
        if values is not None and not isinstance(values, Mapping):
            raise TopsailError(f"{where}: must be a mapping, not {type(values).__name__}")
        try:
            checked = _RegressionInput.model_validate(dict(values or {}))
        except pydantic.ValidationError as error:
            problems = "; ".join(f"{where}.{'.'.join(map(str, e['loc']))}: {e['msg']}, got {e['input']!r}"
                                 if e["type"] != "extra_forbidden" else
                                 f"{where}: unknown key {'.'.join(map(str, e['loc']))!r}; known: "
                                 f"{', '.join(sorted(_RegressionInput.model_fields))}"
                                 for e in error.errors())
            raise TopsailError(problems) from None
        return cls(**{**checked.model_dump(), "comparison_keys": tuple(checked.comparison_keys),
                      "ignored_keys": tuple(checked.ignored_keys)})


class _RegressionInput(pydantic.BaseModel):
    """The ``regression:`` section as written by the user, checked strictly by type."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)

    comparison_keys: list[str] = []
    ignored_keys: list[str] = []
    fail_on_regression: bool = False
    window_len: int = pydantic.Field(50, ge=2)
    max_pvalue: float = pydantic.Field(0.001, gt=0, le=1)
    min_magnitude: float = pydantic.Field(0.0, ge=0)
    min_history: int = pydantic.Field(5, ge=1)
    short_history_threshold: float = pydantic.Field(10.0, ge=0)
    engine: Literal["auto", "builtin", "otava"] = "auto"


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
    change_percent: float | None = None
    pvalue: float | None = None
    history_size: int = 0
    reference: float | None = None
    method: str = ""
    format: str = "{}"
    history: list[dict[str, Any]] = field(default_factory=list)  # [{timestamp, value, test_uuid}] oldest first
    change_points: list[int] = field(default_factory=list)  # indexes into history + [current]

    def as_dict(self, with_history: bool = False) -> dict[str, Any]:
        data = asdict(self)
        if not with_history:
            data.pop("history")
            data.pop("change_points")
        return data

    def describe(self) -> str:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        change = "" if self.change_percent is None else f" {self.change_percent:+.1f}%"
        pvalue = "" if self.pvalue is None else f" p={self.pvalue:.2g}"
        return (f"{self.suite} {self.kpi}={self.value:g} {self.unit}{change}{pvalue} vs {self.history_size} "
                f"previous ({labels}) [{self.nodeid}]")


def _direction(change: float, higher_better: bool) -> str:
    worse = change < 0 if higher_better else change > 0
    return "regression" if worse else "improvement"


def judge(record: Mapping[str, Any], history: Sequence[Mapping[str, Any]], settings: RegressionSettings) -> Verdict:
    """Verdict for one KPI record given its history records (any order; filtered to older values here)."""
    previous = sorted(
        (h for h in history if h.get("test_uuid") != record.get("test_uuid")
         and float(h["timestamp"]) < float(record["timestamp"])),
        key=lambda h: float(h["timestamp"]))
    verdict = Verdict(
        suite=str(record.get("suite")), nodeid=str(record.get("nodeid")), kpi=record["name"],
        value=float(record["value"]), unit=record.get("unit", ""), higher_better=bool(record["higher_better"]),
        labels=dict(record.get("labels") or {}), status="accepted", history_size=len(previous),
        format=record.get("format") or "{}",
        history=[{"timestamp": float(h["timestamp"]), "value": float(h["value"]), "test_uuid": h.get("test_uuid")}
                 for h in previous])
    if record.get("ignored_for_regression"):
        verdict.status, verdict.method = "ignored", "ignored for regression"
        return verdict
    if not previous:
        verdict.status, verdict.method = "no_history", "no history"
        return verdict
    values = [h["value"] for h in verdict.history] + [verdict.value]
    if len(previous) < settings.min_history:
        reference = float(np.mean(values[:-1]))
        verdict.method, verdict.reference = "short history: change vs mean", reference
        if reference != 0:
            verdict.change_percent = (verdict.value / reference - 1.0) * 100.0
            if abs(verdict.change_percent) > settings.short_history_threshold:
                verdict.status = _direction(verdict.change_percent, verdict.higher_better)
        return verdict
    points = change_points(values, settings)
    verdict.method = "e-divisive"
    verdict.change_points = [p.index for p in points]
    start = points[-1].index if points and points[-1].index < len(values) - 1 else (
        points[-2].index if len(points) >= 2 else 0)
    if points and points[-1].index == len(values) - 1:
        last = points[-1]
        verdict.reference, verdict.pvalue = last.mean_before, last.pvalue
        verdict.change_percent = last.forward_change() * 100.0
        verdict.status = _direction(verdict.change_percent, verdict.higher_better)
    else:
        reference = float(np.mean(values[start:-1])) if len(values[start:-1]) else None
        verdict.reference = reference
        if reference:
            verdict.change_percent = (verdict.value / reference - 1.0) * 100.0
    return verdict


def summarize(verdicts: Iterable[Verdict], total_points: int) -> dict[str, Any]:
    """Counts for regression_summary.yaml; improvements are never failures."""
    verdicts = list(verdicts)
    counts = {status: sum(v.status == status for v in verdicts) for status in VERDICTS}
    entries = {(v.suite, v.nodeid) for v in verdicts}
    summary = {
        "total_points": total_points,
        "entries_count": len(entries),
        "kpis_count": len(verdicts),
        "failures": counts["regression"],
        "no_history": counts["no_history"],
        "not_analyzed": counts["ignored"],
        "accepted": counts["accepted"],
        "significant_performance_increase": counts["improvement"],
        "significant_performance_decrease": counts["regression"],
    }
    if counts["regression"]:
        message = f"{counts['regression']} KPI regression(s) detected"
    elif counts["improvement"]:
        message = f"no regression; {counts['improvement']} improvement(s)"
    else:
        message = "no regression"
    summary["message"] = message
    summary["regressions"] = [v.describe() for v in verdicts if v.status == "regression"]
    return summary
