"""Terminal summary: one table of verdicts, the regressions, where the outputs are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_topsail.kpi import format_value
from pytest_topsail.regression import Verdict

MAX_ROWS = 40


def verdict_table(verdicts: Sequence[Verdict], verbose: bool) -> list[str]:
    shown = list(verdicts) if verbose or len(verdicts) <= MAX_ROWS else [
        v for v in verdicts if v.status in ("regression", "improvement")]
    header = ("suite", "item", "KPI", "value", "change", "history", "verdict")
    rows = [header] + [
        (v.suite, v.nodeid.split("::")[-1], v.kpi, f"{format_value(v.value, v.format)} {v.unit}".strip(),
         "" if v.change_percent is None else f"{v.change_percent:+.1f}%", str(v.history_size), v.status.upper()
         if v.status == "regression" else v.status)
        for v in shown
    ]
    widths = [min(60, max(len(row[i]) for row in rows)) for i in range(len(header))]
    lines = ["  ".join(cell[:60].ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    if len(shown) < len(verdicts):
        lines.append(f"({len(verdicts) - len(shown)} accepted / no-history rows hidden; -v shows all)")
    return lines


def write_summary(terminal: Any, verdicts: Sequence[Verdict], summary: dict[str, Any], outputs: dict[str, str],
                  problems: Sequence[str], failing: Sequence[str], verbose: bool) -> None:
    terminal.write_sep("=", "topsail KPIs and regressions")
    if verdicts:
        for line in verdict_table(verdicts, verbose):
            terminal.write_line(line)
    terminal.write_line(
        f"{summary.get('kpis_count', 0)} KPI(s): {summary.get('failures', 0)} regression(s), "
        f"{summary.get('significant_performance_increase', 0)} improvement(s), {summary.get('accepted', 0)} accepted, "
        f"{summary.get('no_history', 0)} without history, {summary.get('not_analyzed', 0)} ignored")
    for problem in problems:
        terminal.write_line(f"problem: {problem}", yellow=True)
    if failing:
        terminal.write_sep("-", "session failed: KPI regressions (fail_on_regression)", red=True)
        for line in failing:
            terminal.write_line(f"REGRESSION {line}", red=True)
    for name, path in outputs.items():
        terminal.write_line(f"topsail {name}: {path}")
