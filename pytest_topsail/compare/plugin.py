"""``--topsail-baseline RUN``: this run judged against one chosen run (an artifacts directory or a run id of the
history) with the statistics of ``python -m pytest_topsail.compare``, once at the end of the session
(``judge_baseline``, called by the report before it writes report.html): the KPIs significantly worse or better and
the verdict line in the terminal summary, beside the history verdicts; a "Against the baseline" section of
report.html; per compared KPI a junit property ``baseline.<kpi>`` (``report.junit.add_baseline``); and the
comparison page ``baseline.html`` at the artifacts root. It changes no outcome and no exit status."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_topsail.compare.pairs import Comparison

PAGE = "baseline.html"
REPORT_STATES = {"worse": "regression", "better": "improvement"}  # report.html's colours of a verdict
JUDGEMENT_KEY = pytest.StashKey["BaselineJudgement"]()


@dataclass
class BaselineJudgement:
    """This run against the baseline run: the baseline's name and where it was read, every comparison (this run
    is B), the page written, or why nothing could be compared (``error``)."""

    option: str
    name: str = ""
    source: str = ""
    comparisons: list[Comparison] = field(default_factory=list)
    page: Path | None = None
    error: str = ""

    def summary(self) -> str:
        from pytest_topsail.compare.pairs import summary_line

        return self.error or summary_line(self.comparisons)

    def report_context(self) -> dict[str, Any]:
        """What report.html's baseline section shows: the run named, the verdict line, the KPIs judged worse or
        better (each with its interval) and those not comparable."""
        from pytest_topsail.compare.output import row_cells, shown
        from pytest_topsail.compare.stats import SAME

        rows = [dict(zip(("item", "kpi", "baseline", "value", "change", "p", "verdict"), row_cells(c), strict=True))
                | {"state": REPORT_STATES.get(c.verdict, "ignored"), "method": c.method}
                for c in shown(self.comparisons, everything=False) if c.verdict != SAME]
        return {"name": self.name or self.option, "source": self.source, "summary": self.summary(),
                "page": str(self.page) if self.page else "", "rows": rows}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("topsail").addoption(
        "--topsail-baseline", dest="topsail_baseline", default=None, metavar="RUN",
        help="judge this run against RUN (an artifacts directory or a run id of the history): "
             "python -m pytest_topsail.compare's statistics, in the terminal summary, report.html, junit and "
             "<artifacts>/" + PAGE)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    judgement = judge_baseline(config)
    if judgement is not None:
        for line in baseline_lines(judgement):
            terminalreporter.write_line(line)


def judge_baseline(config: pytest.Config, root: Path | None = None) -> BaselineJudgement | None:
    """The run at `root` (this session's artifacts root by default; the run replotted with ``--topsail-replot``)
    against ``--topsail-baseline``: None without the option, and on an xdist worker; computed once per session."""
    from pytest_topsail.xdist_role import role_of

    baseline = config.getoption("topsail_baseline", None)
    if not baseline or role_of(config).is_worker:
        return None
    if JUDGEMENT_KEY not in config.stash:
        config.stash[JUDGEMENT_KEY] = compare_with(config, str(baseline), root)
    return config.stash[JUDGEMENT_KEY]


def compare_with(config: pytest.Config, baseline: str, root: Path | None) -> BaselineJudgement:
    from pytest_topsail.compare.load import load_artifacts, load_runs
    from pytest_topsail.compare.output import write_html
    from pytest_topsail.compare.pairs import compare_runs, exit_code
    from pytest_topsail.errors import TopsailError
    from pytest_topsail.report.context import DEFAULT_HISTORY
    from pytest_topsail.run import artifacts_root

    history = Path(config.getoption("topsail_history", None) or config.rootpath / DEFAULT_HISTORY)
    root = root or artifacts_root(config)
    judgement = BaselineJudgement(baseline)
    try:
        runs = load_runs(baseline, history)
        if len(runs) != 1:
            raise TopsailError(f"{baseline}: {len(runs)} runs in it, one baseline run expected")
        judgement.name, judgement.source = runs[0].name, str(runs[0].source)
        current = load_artifacts(root)
        current.name = "this run"
        judgement.comparisons = compare_runs([runs[0], current], config.rootpath / "suites", history=history)
    except TopsailError as error:
        judgement.error = f"--topsail-baseline: {error}"
        return judgement
    judgement.page = write_html(root / PAGE, [runs[0], current], judgement.comparisons, [],
                                config.rootpath / "suites", exit_code(judgement.comparisons))
    return judgement


def baseline_lines(judgement: BaselineJudgement) -> list[str]:
    from pytest_topsail.compare.output import HEADER, row_cells, shown, table_lines
    from pytest_topsail.compare.stats import SAME

    if judgement.error:
        return [f"topsail: {judgement.error}"]
    judged = [c for c in shown(judgement.comparisons, everything=False) if c.verdict != SAME]
    lines = [f"topsail: against the baseline {judgement.name} [{judgement.source}]"]
    if judged:
        lines += table_lines(HEADER, [row_cells(c) for c in judged])
    return [*lines, f"topsail baseline {judgement.summary()}; page {judgement.page}"]


def pytest_topsail_baseline(config: pytest.Config, root: Path | None) -> BaselineJudgement | None:
    """The hook the reporting calls (hookspec.py): this run against ``--topsail-baseline``."""
    return judge_baseline(config, root)
