"""Change points of KPI series: E-divisive means with a Student t-test (Hunter / Apache Otava's method).

The built-in engine judges many series at once: every step of the algorithm (best split of an interval, t-test of
a candidate, merge of weak points) runs for all series in one numpy operation, so 1,000 series cost a few dozen
array operations instead of thousands of small ones. It finds the same change points as apache-otava 0.8
(``tests/report/data/otava_corpus.json``). ``otava_change_points`` calls otava itself when it is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np
from scipy.special import stdtr


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


# ---------------------------------------------------------------- t-test, vectorized


@dataclass
class _Segments:
    """Left and right segments of many t-tests, padded into rows."""

    left: np.ndarray
    right: np.ndarray
    n_left: np.ndarray
    n_right: np.ndarray


def _segments(requests: Sequence[tuple[np.ndarray, int, int, int]]) -> _Segments:
    """Rows ``values[a:index]`` and ``values[index:b]`` for each request (values, a, index, b)."""
    n_left = np.array([i - a for _, a, i, _ in requests])
    n_right = np.array([b - i for _, _, i, b in requests])
    left = np.zeros((len(requests), max(1, int(n_left.max()))))
    right = np.zeros((len(requests), max(1, int(n_right.max()))))
    for row, (values, a, index, b) in enumerate(requests):
        left[row, :index - a] = values[a:index]
        right[row, :b - index] = values[index:b]
    return _Segments(left, right, n_left, n_right)


def _moments(rows: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population standard deviation of each row's first ``counts`` values (0 for fewer than 2)."""
    mask = np.arange(rows.shape[1])[None, :] < counts[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(mask, rows, 0.0).sum(axis=1) / counts
        spread = np.where(mask, rows - mean[:, None], 0.0)
        std = np.sqrt((spread * spread).sum(axis=1) / counts)
    return mean, np.where(counts >= 2, std, 0.0)


def t_tests(requests: Sequence[tuple[np.ndarray, int, int, int]]) -> np.ndarray:
    """Pooled two-sided Student t-tests of ``values[a:index]`` against ``values[index:b]``, one per request.

    Rows of (pvalue, mean_left, mean_right, std_left, std_right), with population standard deviations (otava's).
    """
    if not requests:
        return np.zeros((0, 5))
    seg = _segments(requests)
    mean_l, std_l = _moments(seg.left, seg.n_left)
    mean_r, std_r = _moments(seg.right, seg.n_right)
    dof = (seg.n_left + seg.n_right - 2).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = ((seg.n_left - 1) * std_l**2 + (seg.n_right - 1) * std_r**2) / dof
        denominator = np.sqrt(pooled * (1.0 / seg.n_left + 1.0 / seg.n_right))
        difference = mean_l - mean_r
        t = difference / denominator
        # two-sided: 2 sf(|t|) of Student's t, as scipy.stats.ttest_ind_from_stats computes it (otava's test)
        pvalue = np.where(np.isfinite(t), 2.0 * stdtr(dof, -np.abs(t)), 1.0)
    pvalue = np.where(denominator == 0.0, np.where(difference == 0.0, np.nan, 0.0), pvalue)
    pvalue = np.where(dof <= 0, 1.0, pvalue)
    return np.stack([pvalue, mean_l, mean_r, std_l, std_r], axis=1)


def t_test_pvalue(left: np.ndarray, right: np.ndarray) -> tuple[float, float, float, float, float]:
    """One pooled two-sided Student t-test: (p, mean_l, mean_r, std_l, std_r)."""
    values = np.concatenate([np.asarray(left, dtype=float), np.asarray(right, dtype=float)])
    row = t_tests([(values, 0, len(left), len(values))])[0]
    return tuple(float(v) for v in row)  # type: ignore[return-value]


def _stated(point: ChangePoint, stats: np.ndarray) -> ChangePoint:
    pvalue, mean_l, mean_r, std_l, std_r = (float(v) for v in stats)
    return ChangePoint(point.index, point.qhat, pvalue, mean_l, mean_r, std_l, std_r)


# ---------------------------------------------------------------- best splits, vectorized


@cache
def _split_grid(size: int) -> tuple[np.ndarray, ...]:
    """Coefficients of the energy statistic for intervals padded to ``size`` points, rows tau = 1..size-1,
    columns kappa = 2..size (cells with kappa <= tau are never used)."""
    taus = np.arange(1, size)[:, None]
    kappas = np.arange(2, size + 1)[None, :]
    ordered = kappas > taus
    n = np.broadcast_to(taus, ordered.shape).astype(float)
    m = np.where(ordered, kappas - taus, 1).astype(float)
    total = m + n
    with np.errstate(divide="ignore", invalid="ignore"):
        coef_x = np.where(n > 1, 2.0 * m / (total * (n - 1)), 0.0)
        coef_y = np.where(m > 1, 2.0 * n / (total * (m - 1)), 0.0)
    # halved once here: x / 2 is exact in binary floating point, so coef * (s / 2) == (coef / 2) * s bit for bit
    return kappas, ordered, 2.0 / total, coef_x / 2.0, coef_y / 2.0


def _bucket(length: int) -> int:
    return 8 if length <= 8 else 1 << (length - 1).bit_length()


def best_splits(requests: Sequence[tuple[np.ndarray, int, int]]) -> list[tuple[int, float]]:
    """For each (values, start, stop): the split maximizing Q(X=[start:tau], Y=[tau:kappa]) over tau and kappa,
    as (tau, qhat). Intervals of similar length are padded to one size and computed together."""
    found: list[tuple[int, float]] = [(0, 0.0)] * len(requests)
    groups: dict[int, list[int]] = {}
    for position, (_, start, stop) in enumerate(requests):
        groups.setdefault(_bucket(stop - start), []).append(position)
    for size, positions in groups.items():
        size = min(size, max(requests[p][2] - requests[p][1] for p in positions))
        z = np.zeros((len(positions), size))
        lengths = np.empty(len(positions), dtype=int)
        for row, position in enumerate(positions):
            values, start, stop = requests[position]
            z[row, :stop - start] = values[start:stop]
            lengths[row] = stop - start
        for row, (tau, qhat) in enumerate(_best_split_rows(z, lengths)):
            found[positions[row]] = (requests[positions[row]][1] + tau, qhat)
    return found


def _best_split_rows(z: np.ndarray, lengths: np.ndarray, chunk: int = 24) -> list[tuple[int, float]]:
    """Best split of each row of ``z`` (its first ``lengths`` values), in chunks that stay in the CPU caches
    (24 rows of 50 points: 480 kB arrays; larger chunks were up to 40 % slower on a busy 2-core machine)."""
    found: list[tuple[int, float]] = []
    for first in range(0, len(z), chunk):
        found += _best_split_chunk(z[first:first + chunk], lengths[first:first + chunk])
    return found


def _cumulate(c: np.ndarray) -> None:
    """``c[r, i, j] = sum of c[r, :i+1, :j+1]`` in place: the same sequential additions as ``np.cumsum`` along
    axis 1 then axis 2 (bit for bit), one plane of all rows per step; numpy's cumsum runs one short loop per line
    and took half the time of the best split."""
    for i in range(1, c.shape[1]):
        c[:, i, :] += c[:, i - 1, :]
    for j in range(1, c.shape[2]):
        c[:, :, j] += c[:, :, j - 1]


def _best_split_chunk(z: np.ndarray, lengths: np.ndarray) -> list[tuple[int, float]]:
    """The best (tau, qhat) of each row: the first maximum of q in (tau, kappa) order, as one argmax over all
    cells would find it. Only kappa > tau counts: taus of the second half are computed from the diagonal on
    (a quarter of the cells less), taus of the first half against every kappa."""
    count, size = z.shape
    # sums[i, j] = sum of |z[a] - z[b]| over a < i, b < j, stored without its zero row and column: C[i-1, j-1]
    c = np.subtract(z[:, :, None], z[:, None, :])
    np.abs(c, out=c)
    _cumulate(c)
    cells = size - 1  # taus 1..size-1 and kappas 2..size
    if cells < 16:
        q = _q_block(c, lengths, 0, cells)
        best = q.argmax(axis=1)
        return list(zip((best // cells + 1).tolist(), q[np.arange(count), best].tolist(), strict=True))
    half = cells // 2
    first_q, second_q = _q_block(c, lengths, 0, half, columns_from=0), _q_block(c, lengths, half, cells)
    first_best, second_best = first_q.argmax(axis=1), second_q.argmax(axis=1)
    rows = np.arange(count)
    first_value, second_value = first_q[rows, first_best], second_q[rows, second_best]
    # argmax takes a NaN as the maximum; on a tie the first half's smaller tau comes first
    first = np.isnan(first_value) | ((first_value >= second_value) & ~np.isnan(second_value))
    taus = np.where(first, first_best // cells + 1, second_best // (cells - half) + half + 1)
    return list(zip(taus.tolist(), np.where(first, first_value, second_value).tolist(), strict=True))


def _q_block(c: np.ndarray, lengths: np.ndarray, tau_from: int, tau_to: int, columns_from: int | None = None
             ) -> np.ndarray:
    """Q(tau, kappa) of each row for tau indexes [tau_from, tau_to) and kappa indexes from ``columns_from``
    (default ``tau_from``: no kappa <= tau before it), flattened per row; -inf where kappa <= tau or past the
    row's length."""
    size = c.shape[1]
    k0 = tau_from if columns_from is None else columns_from
    t, k = slice(tau_from, tau_to), slice(k0, size - 1)
    grid_kappas, *grids = _split_grid(size)
    kappas = grid_kappas[:, k]
    ordered, scale, half_coef_x, half_coef_y = (grid[t, k] for grid in grids)
    diagonal = np.diagonal(c, axis1=1, axis2=2)
    at_tt = diagonal[:, t, None]  # sums[tau, tau], tau = 1..size-1
    at_tk = c[:, t, k0 + 1:]  # sums[tau, kappa], kappa = 2..size
    at_kt = c[:, k0 + 1:, t].transpose(0, 2, 1)  # sums[kappa, tau]
    at_kk = diagonal[:, None, k0 + 1:]  # sums[kappa, kappa]
    # q = scale * cross - coef_x * within_x - coef_y * within_y, within = sums / 2, in otava's order of operations
    q = np.subtract(at_tk, at_tt)
    q *= scale
    q -= half_coef_x * at_tt
    within_y = np.subtract(at_kk, at_tk)
    within_y -= at_kt
    within_y += at_tt
    within_y *= half_coef_y
    q -= within_y
    np.copyto(q, -np.inf, where=~(ordered[None] & (kappas[None] <= lengths[:, None, None])))
    return q.reshape(len(q), -1)


# ---------------------------------------------------------------- E-divisive: split, then merge


@dataclass
class _Window:
    """One window of one series being split: its change points (window-relative) and the best split of each
    interval between them, computed once per interval."""

    values: np.ndarray
    points: list[ChangePoint]
    splits: dict[tuple[int, int], tuple[int, float]]
    done: bool = False
    intervals: list[tuple[int, int]] = field(default_factory=list)  # between the points, longer than 1

    def __post_init__(self) -> None:
        self.add()

    def add(self, point: ChangePoint | None = None) -> None:
        if point is not None:
            self.points.append(point)
            self.points.sort(key=lambda p: p.index)
        bounds = [0, *[p.index for p in self.points], len(self.values)]
        self.intervals = [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b - a > 1]


def _windows_change_points(windows: list[np.ndarray], max_pvalue: float) -> list[list[ChangePoint]]:
    """Change points of each window: the best split of all intervals, kept while its t-test passes."""
    states = [_Window(w, [], {}) for w in windows]
    while True:
        live = [s for s in states if not s.done]
        missing = [(s, i) for s in live for i in s.intervals if i not in s.splits]
        for (state, interval), split in zip(missing, best_splits([(s.values, *i) for s, i in missing]), strict=True):
            state.splits[interval] = split
        candidates = []
        for state in live:
            intervals = state.intervals
            if not intervals:
                state.done = True
                continue
            best = intervals[0]
            for interval in intervals[1:]:
                if state.splits[interval][1] > state.splits[best][1]:
                    best = interval
            candidates.append((state, best))
        if not candidates:
            return [s.points for s in states]
        stats = t_tests([(s.values, i[0], s.splits[i][0], i[1]) for s, i in candidates])
        for (state, interval), row in zip(candidates, stats, strict=True):
            index, qhat = state.splits[interval]
            if not row[0] <= max_pvalue:
                state.done = True
                continue
            state.add(_stated(ChangePoint(index, qhat), row))


def _restat(series: list[np.ndarray], points: list[list[ChangePoint]], which: list[tuple[int, int]]) -> None:
    """Recompute the t-test of the given (series, point position) against its neighbouring change points."""
    requests = []
    for s, i in which:
        bounds = [0, *[p.index for p in points[s]], len(series[s])]
        requests.append((series[s], bounds[i], points[s][i].index, bounds[i + 2]))
    for (s, i), row in zip(which, t_tests(requests), strict=True):
        points[s][i] = _stated(points[s][i], row)


def _split(series: list[np.ndarray], window_len: int, max_pvalue: float) -> list[list[ChangePoint]]:
    """Overlapping windows (step window_len / 2), all series in lockstep; points stated against their neighbours."""
    step = window_len // 2
    found: list[dict[int, ChangePoint]] = [{} for _ in series]
    starts = {s: 0 for s in range(len(series)) if len(series[s]) > 0}
    while starts:
        order = list(starts)
        windows = [series[s][starts[s]:min(starts[s] + window_len, len(series[s]))] for s in order]
        for s, new_points in zip(order, _windows_change_points(windows, max_pvalue), strict=True):
            for point in new_points:
                point.index += starts[s]
                found[s].setdefault(point.index, point)
            last = new_points[-1].index if new_points else 0
            starts[s] = max(last, starts[s] + step)
            if starts[s] >= len(series[s]):
                del starts[s]
    points = [sorted(f.values(), key=lambda p: p.index) for f in found]
    _restat(series, points, [(s, i) for s in range(len(series)) for i in range(len(points[s]))])
    return points


def _merge(series: list[np.ndarray], points: list[list[ChangePoint]], max_pvalue: float,
           min_magnitudes: Sequence[float]) -> list[list[ChangePoint]]:
    """Drop the weakest point (highest p-value, else smallest magnitude) of every series until all are strong;
    series in lockstep, the neighbours of dropped points re-tested together."""
    live = [s for s in range(len(series)) if points[s]]
    while live:
        restat: list[tuple[int, int]] = []
        still = []
        for s in live:
            weakest = max(points[s], key=lambda p: p.pvalue)
            if weakest.pvalue < max_pvalue:
                weakest = min(points[s], key=lambda p: p.magnitude())
                if weakest.magnitude() > min_magnitudes[s]:
                    continue
            position = points[s].index(weakest)
            del points[s][position]
            restat += [(s, i) for i in (position, position + 1) if 0 <= i < len(points[s])]
            if points[s]:
                still.append(s)
        _restat(series, points, restat)
        live = still
    return points


def first_pass_pvalue(max_pvalue: float) -> float:
    """Otava splits with a looser p-value (weak change points), then merges down to ``max_pvalue``."""
    return max_pvalue * 10 if max_pvalue < 0.05 else (max_pvalue * 2 if max_pvalue < 0.5 else max_pvalue)


def builtin_change_points_many(series: Sequence[Sequence[float]], window_len: int = 50, max_pvalue: float = 0.001,
                               min_magnitude: float | Sequence[float] = 0.0) -> list[list[ChangePoint]]:
    """Change points of each series (``min_magnitude`` one for all or one per series), all series together."""
    arrays = [np.asarray(s, dtype=float) for s in series]
    magnitudes = [float(min_magnitude)] * len(arrays) if isinstance(min_magnitude, int | float) \
        else [float(m) for m in min_magnitude]
    if len(magnitudes) != len(arrays):
        raise ValueError("min_magnitude: one value, or one per series")
    usable = [s for s in range(len(arrays)) if len(arrays[s]) >= 2]
    subset = [arrays[s] for s in usable]
    merged = _merge(subset, _split(subset, window_len, first_pass_pvalue(max_pvalue)), max_pvalue,
                    [magnitudes[s] for s in usable])
    result: list[list[ChangePoint]] = [[] for _ in arrays]
    for s, points in zip(usable, merged, strict=True):
        result[s] = points
    return result


def builtin_change_points(series: Sequence[float], window_len: int = 50, max_pvalue: float = 0.001,
                          min_magnitude: float = 0.0) -> list[ChangePoint]:
    """Change points of one series (E-divisive means + t-test, split then merge); same results as otava's."""
    return builtin_change_points_many([series], window_len, max_pvalue, min_magnitude)[0]


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
