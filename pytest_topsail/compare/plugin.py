"""``--topsail-baseline RUN``: this run judged against one chosen run (an artifacts directory or a run id of the
history) with the statistics of ``python -m pytest_topsail.compare``, at the end of the session: the KPIs
significantly worse or better and the verdict line in the terminal summary, beside the history verdicts, and the
comparison page ``baseline.html`` at the artifacts root. It changes no outcome and no exit status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

PAGE = "baseline.html"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("topsail").addoption(
        "--topsail-baseline", dest="topsail_baseline", default=None, metavar="RUN",
        help="judge this run against RUN (an artifacts directory or a run id of the history): "
             "python -m pytest_topsail.compare's statistics, in the terminal summary and <artifacts>/" + PAGE)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    baseline = config.getoption("topsail_baseline", None)
    if not baseline or hasattr(config, "workerinput"):
        return
    for line in baseline_lines(config, str(baseline)):
        terminalreporter.write_line(line)


def baseline_lines(config: pytest.Config, baseline: str) -> list[str]:
    from pytest_topsail.compare.load import load_artifacts, load_runs
    from pytest_topsail.compare.output import HEADER, row_cells, table_lines, write_html
    from pytest_topsail.compare.pairs import compare_runs, exit_code, summary_line
    from pytest_topsail.compare.stats import INFORMATIONAL, SAME
    from pytest_topsail.errors import TopsailError
    from pytest_topsail.report.context import DEFAULT_HISTORY
    from pytest_topsail.run import artifacts_root

    history = Path(config.getoption("topsail_history", None) or config.rootpath / DEFAULT_HISTORY)
    root = artifacts_root(config)
    try:
        runs = load_runs(baseline, history)
        if len(runs) != 1:
            raise TopsailError(f"{baseline}: {len(runs)} runs in it, one baseline run expected")
        current = load_artifacts(root)
        current.name = "this run"
        comparisons = compare_runs([runs[0], current], config.rootpath / "suites", history=history)
    except TopsailError as error:
        return [f"topsail: --topsail-baseline: {error}"]
    shown = [c for c in comparisons if c.verdict not in (SAME, INFORMATIONAL)]
    page = write_html(root / PAGE, [runs[0], current], comparisons, [], config.rootpath / "suites",
                      exit_code(comparisons))
    lines = [f"topsail: against the baseline {runs[0].name} [{runs[0].source}]"]
    if shown:
        lines += table_lines(HEADER, [row_cells(c) for c in shown])
    return [*lines, f"topsail baseline {summary_line(comparisons)}; page {page}"]
