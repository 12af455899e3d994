"""What a comparison writes: the terminal table, the matrix of many runs (items against runs, one table per headline
KPI), one offline HTML page (the report's look and figure code: ``report.html.write_page``, ``figure_context``) with
the samples' distributions of each matched item overlaid run by run, and a junit file with one testcase per compared
KPI (a failure for a significantly worse one). The page draws each headline KPI against the setting a suite sweeps
(throughput against concurrency), run by run, then the distributions."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_topsail.compare.load import Run, RunItem, item_samples, suite_kpis
from pytest_topsail.compare.pairs import Comparison, counts, summary_line
from pytest_topsail.compare.stats import BETTER, INFORMATIONAL, NOT_COMPARABLE, SAME, WORSE
from pytest_topsail.kpi import format_value
from pytest_topsail.report.matrix import headline_kpis

HEADER = ("item", "KPI", "A", "B", "change [interval]", "p", "verdict")
VERDICT_ORDER = {WORSE: 0, NOT_COMPARABLE: 1, BETTER: 2, SAME: 3, INFORMATIONAL: 4}
VERDICT_COLORS = {WORSE: "#d62728", BETTER: "#2ca02c", NOT_COMPARABLE: "#ff7f0e", SAME: "#6b7280",
                  INFORMATIONAL: "#9ca3af"}
CDF_POINTS = 200  # a distribution is drawn through this many quantiles
MAX_CELL = 60


def shown(comparisons: Sequence[Comparison], everything: bool) -> list[Comparison]:
    """The rows worth a line: all with ``everything``, else all but the informational ones and the matched KPIs of
    a pair judged item by item (one line says an item is missing)."""
    rows = [c for c in comparisons if everything or c.verdict != INFORMATIONAL]
    return sorted(rows, key=lambda c: (VERDICT_ORDER[c.verdict], c.suite, c.item, c.kpi))


def row_cells(comparison: Comparison) -> tuple[str, ...]:
    pvalue = comparison.difference.pvalue if comparison.difference else None
    verdict = comparison.verdict
    if comparison.verdict in (NOT_COMPARABLE, INFORMATIONAL) and comparison.reason:
        verdict = f"{verdict}: {comparison.reason}"
    elif comparison.note:
        verdict = f"{verdict}: {comparison.note}"
    return (f"{comparison.suite} {comparison.item}", comparison.kpi, comparison.value_text(comparison.value_a),
            comparison.value_text(comparison.value_b), comparison.change_text(),
            "" if pvalue is None else f"{pvalue:.2g}", verdict)


def table_lines(header: Sequence[str], rows: Sequence[Sequence[str]], max_cell: int = MAX_CELL) -> list[str]:
    """A plain table: columns as wide as their content, a cell longer than ``max_cell`` cut with an ellipsis (the
    last column is never cut)."""
    def cut(cell: str, last: bool) -> str:
        return cell if last or len(cell) <= max_cell else cell[:max_cell - 1] + "…"

    cells = [[cut(cell, i == len(row) - 1) for i, cell in enumerate(row)] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def terminal_report(runs: Sequence[Run], comparisons: Sequence[Comparison], everything: bool = False) -> list[str]:
    baseline = runs[0]
    lines = [f"A (baseline): {baseline.name} [{baseline.source}]"]
    lines += [f"B: {run.name} [{run.source}]" for run in runs[1:]]
    rows = shown(comparisons, everything)
    if rows:
        lines += ["", *table_lines(HEADER, [row_cells(c) for c in rows])]
    hidden = len(comparisons) - len(rows)
    if hidden:
        lines.append(f"({hidden} informational KPIs not shown: --all shows them)")
    return lines


# ---------------------------------------------------------------- the matrix of many runs


@dataclass
class MatrixTable:
    """One headline KPI of one suite: items (rows) against runs (columns)."""

    suite: str
    kpi: str
    unit: str
    runs: list[str]
    rows: list[tuple[str, list[str]]] = field(default_factory=list)


def build_matrix(runs: Sequence[Run]) -> list[MatrixTable]:
    """Per suite and headline KPI (the suite's ``report.headline_kpis``, else its first judged KPIs), a table of its
    items (matched by case settings) against the runs."""
    by_settings = all(run.has_settings for run in runs)
    suites: dict[str, dict[str, list[RunItem | None]]] = defaultdict(dict)
    for column, run in enumerate(runs):
        for item in run.items:
            row = suites[item.suite].setdefault(item.key(by_settings), [None] * len(runs))
            row[column] = item
    tables = []
    for suite, rows in suites.items():
        items = [item for row in rows.values() for item in row if item is not None]
        wanted = next((run.configs[suite].get("report", {}).get("headline_kpis") for run in runs
                       if run.configs.get(suite)), None)
        for kpi in headline_kpis([item.record for item in items], wanted, [], suite):
            unit = next((item.kpis[kpi].get("unit") or "" for item in items if kpi in item.kpis), "")
            table = MatrixTable(suite, kpi, str(unit), [run.name for run in runs])
            for row in rows.values():
                name = next(item.test_id for item in row if item is not None)
                table.rows.append((name, [cell_value(item, kpi) for item in row]))
            tables.append(table)
    return tables


def cell_value(item: RunItem | None, kpi: str) -> str:
    record = item.kpis.get(kpi) if item is not None else None
    return "-" if record is None else format_value(float(record["value"]), record.get("format"))


def matrix_lines(tables: Sequence[MatrixTable]) -> list[str]:
    lines: list[str] = []
    for table in tables:
        lines += ["", f"{table.suite}: {table.kpi} ({table.unit})".replace(" ()", "")]
        lines += table_lines(["item", *table.runs], [[name, *cells] for name, cells in table.rows])
    return lines


# ---------------------------------------------------------------- junit


def write_junit(path: Path, comparisons: Sequence[Comparison]) -> Path:
    """One testcase per compared KPI (``<suite>.<item>`` / KPI): a failure when significantly worse, skipped when
    not comparable or informational; the values, change and method as properties."""
    counted = counts(comparisons)
    suite = ElementTree.Element("testsuite", name="topsail-compare", tests=str(len(comparisons)),
                                failures=str(counted[WORSE]),
                                skipped=str(counted[NOT_COMPARABLE] + counted[INFORMATIONAL]), errors="0")
    for comparison in comparisons:
        case = ElementTree.SubElement(suite, "testcase", classname=f"{comparison.suite}.{comparison.item}",
                                      name=comparison.kpi, time="0")
        properties = ElementTree.SubElement(case, "properties")
        for name, value in (("A", comparison.value_text(comparison.value_a)),
                            ("B", comparison.value_text(comparison.value_b)), ("change", comparison.change_text()),
                            ("verdict", comparison.verdict), ("method", comparison.method),
                            ("reason", comparison.reason), ("note", comparison.note)):
            ElementTree.SubElement(properties, "property", name=name, value=value)
        message = f"{comparison.kpi} {comparison.verdict}: {comparison.change_text()} ({comparison.reason})"
        if comparison.verdict == WORSE:
            ElementTree.SubElement(case, "failure", message=message).text = comparison.method
        elif comparison.verdict in (NOT_COMPARABLE, INFORMATIONAL):
            ElementTree.SubElement(case, "skipped", message=message)
    root = ElementTree.Element("testsuites")
    root.append(suite)
    ElementTree.indent(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    ElementTree.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path


# ---------------------------------------------------------------- HTML


def distribution_figures(runs: Sequence[Run], suites_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """(title, plotly spec): per matched item and sampled metric, the distribution (CDF) of each run's samples."""
    by_settings = all(run.has_settings for run in runs)
    matched: dict[str, list[tuple[str, RunItem]]] = defaultdict(list)
    for run in runs:
        for item in run.items:
            matched[item.key(by_settings)].append((run.name, item))
    figures = []
    for entries in matched.values():
        if len(entries) < 2:
            continue
        samples = [(name, item_samples(item, suites_dir)) for name, item in entries]
        metrics = [m for m in samples[0][1] if all(m in s for _, s in samples)]
        item = entries[0][1]
        for metric in metrics:
            traces = [cdf_trace(name, found[metric]) for name, found in samples]
            figures.append((f"{item.suite} {item.test_id}: {metric}", {
                "data": traces, "layout": {"xaxis": {"title": {"text": metric}},
                                           "yaxis": {"title": {"text": "fraction of samples"}, "range": [0, 1]},
                                           "margin": {"t": 30}, "legend": {"orientation": "h"}}}))
    return figures


def suite_figures(runs: Sequence[Run], suites_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """(title, plotly spec): each suite's own figures of the runs overlaid (its kpis.py ``compare_figures``, given
    its items' records per run: fine_tuning's loss curves and tokens/s by GPU count)."""
    figures = []
    for suite in sorted({item.suite for run in runs for item in run.items}):
        draw = suite_kpis((suites_dir / suite / "kpis.py").resolve()).compare_figures
        records = {run.name: [{**item.record.to_dict(), "artifact_dir": str(item.directory or "")}
                              for item in run.items if item.suite == suite] for run in runs}
        if draw is not None and sum(1 for found in records.values() if found) > 1:
            figures += [(f"{suite}: {title}", spec) for title, spec in draw(records).items()]
    return figures


def sweep_figures(runs: Sequence[Run], tables: Sequence[MatrixTable]) -> list[tuple[str, dict[str, Any]]]:
    """(title, plotly spec): each headline KPI against the numeric case setting its suite's items vary (throughput
    against concurrency, tokens/s against GPUs), one line per run and per value of the other settings."""
    figures = []
    for table in tables:
        items = [(run.name, item) for run in runs for item in run.items
                 if item.suite == table.suite and item.settings and table.kpi in item.kpis]
        swept = swept_setting([item.settings or {} for _, item in items])
        if swept is None:
            continue
        lines: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        for name, item in items:
            settings = item.settings or {}
            others = ", ".join(f"{k}={v}" for k, v in sorted(settings.items()) if k != swept and varies(items, k))
            lines[(name, others)].append((float(settings[swept]), float(item.kpis[table.kpi]["value"])))
        traces = [{"type": "scatter", "mode": "lines+markers", "name": f"{name} {others}".strip(),
                   "x": [x for x, _ in sorted(points)], "y": [y for _, y in sorted(points)]}
                  for (name, others), points in lines.items()]
        unit = f" ({table.unit})" if table.unit else ""
        figures.append((f"{table.suite}: {table.kpi} against {swept}", {
            "data": traces, "layout": {"xaxis": {"title": {"text": swept}},
                                       "yaxis": {"title": {"text": table.kpi + unit}},
                                       "margin": {"t": 30}, "legend": {"orientation": "h"}}}))
    return figures


def swept_setting(settings: Sequence[dict[str, Any]]) -> str | None:
    """The first top-level setting every item has as a number and that takes several values."""
    if not settings:
        return None
    for key in settings[0]:
        values = [s.get(key) for s in settings]
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        if numeric and len(set(values)) > 1:
            return key
    return None


def varies(items: Sequence[tuple[str, RunItem]], key: str) -> bool:
    values = {json.dumps((item.settings or {}).get(key), sort_keys=True, default=str) for _, item in items}
    return len(values) > 1


def cdf_trace(name: str, samples: np.ndarray) -> dict[str, Any]:
    levels = np.linspace(0.0, 1.0, min(CDF_POINTS, len(samples)))
    return {"type": "scatter", "mode": "lines", "name": f"{name} ({len(samples)})",
            "x": [round(float(v), 4) for v in np.quantile(samples, levels)], "y": [round(float(v), 4) for v in levels],
            "line": {"shape": "hv"}}


def write_html(path: Path, runs: Sequence[Run], comparisons: Sequence[Comparison], tables: Sequence[MatrixTable],
               suites_dir: Path, exit_code: int) -> Path:
    """The comparison as one offline page (the report's template helpers and figure script)."""
    from pytest_topsail.report.html import Figure, figure_context, write_page

    drawn = [*sweep_figures(runs, tables or build_matrix(runs)), *suite_figures(runs, suites_dir),
             *distribution_figures(runs, suites_dir)]
    figures = [Figure(title=title, spec=spec, id=f"fig-{index}") for index, (title, spec) in enumerate(drawn)]
    rows = [dict(zip(("item", "kpi", "a", "b", "change", "p", "verdict"), row_cells(c), strict=True))
            | {"color": VERDICT_COLORS[c.verdict], "method": c.method, "reason": c.reason}
            for c in shown(comparisons, everything=True)]
    context = {**figure_context(figures), "title": "Comparison of " + " and ".join(run.name for run in runs),
               "runs": [{"name": run.name, "source": run.source, "role": "A (baseline)" if i == 0 else "B"}
                        for i, run in enumerate(runs)],
               "summary": summary_line(comparisons), "exit_code": exit_code, "rows": rows,
               "matrix": tables if len(runs) > 2 else []}
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_page("compare.html.j2", context, path)
