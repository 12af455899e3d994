"""Terminal summary: a table only when there is something to say, one closing verdict line.

- the table lists the regressions; ``-v`` adds the improvements, ``-vv`` every verdict; labels shared by every row
  are printed once above it; the width follows the terminal (long cells are cut with an ellipsis); when the output
  is no terminal (CI logs, PyCharm's ``--teamcity`` console) rows are not cut unless ``COLUMNS`` is set;
- verdict states are written by their one name (pytest_topsail/verdict_states.py);
- the closing line says the verdict (``topsail: 2 KPI regressions``), red for regressions, green otherwise;
- pytest's own last line counts the regressions too (``4 passed, 2 KPI regressed in 7.1s``).
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_topsail.kpi import format_value
from pytest_topsail.regression import Verdict, verdict_line
from pytest_topsail.verdict_states import State

if TYPE_CHECKING:
    from pytest_topsail.report.results import Results

STATS_KEY = "KPI regressed"  # pytest prints it in its last line: "4 passed, 2 KPI regressed"
HEADER = ("item", "KPI", "value", "reference", "change", "p", "history", "verdict")
ORDER = {State.REGRESSION.value: 0, State.IMPROVEMENT.value: 1}
UNCUT = 10_000  # the width when the output is no terminal: rows are never cut


def shown_verdicts(verdicts: Sequence[Verdict], verbosity: int) -> list[Verdict]:
    wanted = {State.REGRESSION.value} | ({State.IMPROVEMENT.value} if verbosity >= 1 else set())
    shown = [v for v in verdicts if verbosity >= 2 or v.status in wanted]
    return sorted(shown, key=lambda v: (ORDER.get(v.status, 2), v.suite, v.nodeid, v.kpi))


def common_labels(verdicts: Sequence[Verdict]) -> dict[str, Any]:
    if not verdicts:
        return {}
    first = verdicts[0].labels
    return {k: v for k, v in sorted(first.items()) if all(x.labels.get(k, object()) == v for x in verdicts)}


def _row(verdict: Verdict) -> tuple[str, ...]:
    return (verdict.nodeid.split("::")[-1], verdict.kpi,
            f"{format_value(verdict.value, verdict.format)} {verdict.unit}".strip(),
            format_value(verdict.reference, verdict.format), verdict.change_text(),
            "" if verdict.pvalue is None else f"{verdict.pvalue:.2g}", str(verdict.history_size),
            verdict.status)


def table_lines(verdicts: Sequence[Verdict], width: int) -> list[str]:
    """Columns sized to their content; when too wide, the item column (then the KPI column) is cut: the item
    keeps its end (the parameters), the KPI its start; still too wide, the p, history and reference columns go."""
    rows = [HEADER] + [_row(v) for v in verdicts]
    columns = list(range(len(HEADER)))
    widths = [max(len(row[i]) for row in rows) for i in columns]
    for column in (0, 1):
        excess = _width(widths, columns) - width
        if excess > 0:
            widths[column] = min(widths[column], max(len(HEADER[column]), 16, widths[column] - excess))
    for optional in (HEADER.index("p"), HEADER.index("history"), HEADER.index("reference")):
        if _width(widths, columns) > width:
            columns.remove(optional)
    return ["  ".join(_fit(row[i], widths[i], keep_end=i == 0) for i in columns).rstrip() for row in rows]


def _width(widths: list[int], columns: list[int]) -> int:
    return sum(widths[i] for i in columns) + 2 * (len(columns) - 1)


def _fit(cell: str, width: int, keep_end: bool) -> str:
    if len(cell) <= width:
        return cell.ljust(width)
    return "…" + cell[len(cell) - width + 1:] if keep_end else cell[:width - 1] + "…"


def table_width(terminal: Any) -> int:
    """``COLUMNS`` when set, else the terminal's width; no cut when the output is no terminal."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns)
    writer = getattr(terminal, "_tw", None)
    stream = getattr(writer, "_file", None)
    if stream is not None and hasattr(stream, "isatty") and not stream.isatty():
        return UNCUT
    return int(getattr(writer, "fullwidth", 80) or 80)


def details_line(summary: dict[str, Any], count: int) -> str:
    """``158 KPIs: 150 accepted, 4 insufficient_history, 0 no_history, 4 ignored``."""
    counts = summary.get("verdicts") or {}
    parts = [f"{counts.get(state.value, 0)} {state.value}"
             for state in (State.ACCEPTED, State.INSUFFICIENT_HISTORY, State.NO_HISTORY, State.IGNORED)]
    return f"{summary.get('kpis_count', count)} KPIs: " + ", ".join(parts)


def write_summary(terminal: Any, results: Results, verbosity: int) -> None:
    verdicts, summary, problems = results.verdicts, results.summary, results.all_problems()
    shown = shown_verdicts(verdicts, verbosity)
    width = table_width(terminal)
    if shown or problems:
        terminal.write_sep("=", "topsail KPIs and regressions")
    if shown:
        labels = common_labels(shown)
        if labels:
            text = "labels: " + ", ".join(f"{k}={v}" for k, v in labels.items())
            for line in textwrap.wrap(text, width=max(min(width, 200) - 1, 40), subsequent_indent="  "):
                terminal.write_line(line)
        for number, line in enumerate(table_lines(shown, width)):
            terminal.write_line(line, red=number > 0 and State.REGRESSION in line, bold=number == 0)
    for problem in problems:
        terminal.write_line(f"problem: {problem}", yellow=True)
    if results.interrupted:
        terminal.write_line(f"topsail: run interrupted ({results.interrupted}): the outputs cover the "
                            f"{len(results.records)} of {results.expected or '?'} items that finished", yellow=True)
    for name, path in results.outputs.items():
        terminal.write_line(f"topsail {name}: {path}")
    counts = {state.value: sum(v.status == state for v in verdicts) for state in State}
    hidden = counts[State.IMPROVEMENT] if verbosity < 1 else 0
    details = details_line(summary, len(verdicts)) + ("; -v lists the improvements" if hidden else "")
    failed = " (fail_on_regression: the session fails)" if results.failing else ""
    line = summary.get("message") or verdict_line(counts)
    terminal.write_line(f"topsail: {line}{failed} [{details}]", bold=True,
                        red=bool(counts[State.REGRESSION]), green=not counts[State.REGRESSION])
    regressions = [v for v in verdicts if v.status == State.REGRESSION]
    if regressions:
        terminal.stats.setdefault(STATS_KEY, []).extend(regressions)
