"""``python -m pytest_topsail.compare A B [C ...]``: B (and C ...) against A; exit 0 no significant regression, 1 a
significant regression, 2 not comparable or no baseline, 3 bad input or an error (one message, naming the path)."""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from pytest_topsail.compare.load import Run, load_runs
from pytest_topsail.compare.output import build_matrix, matrix_lines, terminal_report, write_html, write_junit
from pytest_topsail.compare.pairs import ERROR, NO_BASELINE, compare_runs, exit_code, summary_line
from pytest_topsail.compare.stats import CONFIDENCE
from pytest_topsail.errors import TopsailError
from pytest_topsail.report.context import DEFAULT_HISTORY

EPILOG = """exit codes: 0 no significant regression, 1 a significant regression, 2 not comparable or no baseline,
3 bad input or an error. docs/kpis-and-regressions.md, "Comparing runs"."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # exit 3, not argparse's 2 (which means "not comparable" here)
        self.print_usage(sys.stderr)
        self.exit(ERROR, f"{self.prog}: error: {message}\n")


def parser() -> argparse.ArgumentParser:
    parse = Parser(prog="python -m pytest_topsail.compare", epilog=EPILOG,
                   description="Compare runs: every run against the first, KPI by KPI, with confidence intervals "
                               "from the runs' raw samples.")
    parse.add_argument("runs", nargs="+", metavar="RUN",
                       help="an artifacts directory, a directory of runs (all of them), or a run id of the history")
    parse.add_argument("--html", default="compare.html", help="the HTML page to write (default: %(default)s)")
    parse.add_argument("--no-html", action="store_true", help="write no HTML page")
    parse.add_argument("--junitxml", metavar="FILE", help="a junit file: one testcase per compared KPI")
    parse.add_argument("--all", action="store_true", help="also list the informational KPIs")
    parse.add_argument("--history", type=Path, help="the history file: run ids are found in it, and the noise of "
                       "each KPI between runs (default: .topsail/history.sqlite)")
    parse.add_argument("--suites", type=Path, default=Path("suites"),
                       help="the suites directory, whose kpis.py give the raw samples (default: %(default)s)")
    parse.add_argument("--confidence", type=float, default=CONFIDENCE,
                       help="the confidence of the intervals, simultaneous over the KPIs judged (default: "
                            "%(default)s)")
    return parse


def run(arguments: Sequence[str] | None = None) -> int:
    options = parser().parse_args(arguments)
    if not 0.5 <= options.confidence < 1.0:
        print(f"compare: error: --confidence {options.confidence}: between 0.5 and 1 expected", file=sys.stderr)
        return ERROR
    runs: list[Run] = [run for argument in options.runs for run in load_runs(argument, options.history)]
    if len(runs) < 2:
        print(f"compare: {runs[0].name} alone: no baseline to compare it with (give two runs or more)")
        return NO_BASELINE
    comparisons = compare_runs(runs, options.suites, options.confidence, options.history or Path(DEFAULT_HISTORY))
    code = exit_code(comparisons)
    lines = terminal_report(runs, comparisons, everything=options.all)
    tables = build_matrix(runs) if len(runs) > 2 else []
    lines += matrix_lines(tables)
    if not options.no_html:
        page = write_html(Path(options.html), runs, comparisons, tables,
                          options.suites, code)
        lines.append(f"compare report: {page}")
    if options.junitxml:
        lines.append(f"compare junit: {write_junit(Path(options.junitxml), comparisons)}")
    lines.append(f"{summary_line(comparisons)}; exit code {code}")
    print("\n".join(lines))
    return code


def main(arguments: Sequence[str] | None = None) -> int:
    try:
        return run(arguments)
    except TopsailError as error:
        print(f"compare: error: {error}", file=sys.stderr)
    except OSError as error:
        print(f"compare: error: {error.filename or ''}: {error.strerror or error}", file=sys.stderr)
    except Exception:  # a bug: its traceback, but exit 3, never 1 (which says "a regression")
        traceback.print_exc()
    return ERROR


if __name__ == "__main__":
    sys.exit(main())
