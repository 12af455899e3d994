"""pytest hooks of the reporting pipeline (registered by pytest_topsail.plugin): they only dispatch.

Worker or single process: the ``kpis`` fixture fills the item record.
Controller or single process (``ReportPlugin``): each teardown report's ``report.topsail`` is judged against
history at once by ``ItemOutputs`` (so the verdicts reach junit and teamcity with the report), the history comes
from ``HistoryIndex``, and at session end ``SessionOutputs`` stores the KPIs and writes every output. A run stopped
early (SIGINT, SIGTERM, ``-x``) still writes them for the items that finished, and says so.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.report.context import DEFAULT_HISTORY, ReportContext, suite_kpis_of
from pytest_topsail.report.history_index import HistoryIndex
from pytest_topsail.report.item_outputs import ItemOutputs
from pytest_topsail.report.results import Results
from pytest_topsail.report.session_outputs import REPORT_FILE, SessionOutputs

if TYPE_CHECKING:  # kpi and regression import pydantic and numpy: only loaded when a suite reports
    from pytest_topsail.kpi import KpiRecorder

UUID_FILE = ".uuid"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("topsail", "pytest-topsail (performance and scale suites)")
    group.addoption("--topsail-history", dest="topsail_history", default=None, metavar="PATH",
                    help="KPI history: a SQLite file (default: the suite's history.location, else "
                         f"<rootdir>/{DEFAULT_HISTORY}) or 'opensearch' (settings under history.opensearch). A KPI "
                         "gets a verdict once the history holds regression.min_history (default 5) comparable "
                         "earlier runs of it (same labels except the suite's comparison and ignored keys); before "
                         "that it is insufficient_history or no_history")
    group.addoption("--topsail-report", dest="topsail_report", default=None, metavar="PATH",
                    help=f"write the HTML report here (default: <artifacts>/{REPORT_FILE})")
    group.addoption("--topsail-replot", dest="topsail_replot", default=None, metavar="ARTIFACTS_DIR",
                    help="run no test: re-read saved items from ARTIFACTS_DIR into KPIs, verdicts and the report")


def pytest_configure(config: pytest.Config) -> None:
    replot = config.getoption("topsail_replot", None)
    if replot and not Path(replot).is_dir():
        raise pytest.UsageError(f"--topsail-replot {replot}: not a directory")
    if replot and getattr(config.option, "dist", "no") != "no":
        raise pytest.UsageError("--topsail-replot runs no test: it cannot be combined with xdist (-n/--dist)")
    if replot and _rootdir_taken_from_replot(config, Path(replot)):
        raise pytest.UsageError(
            f"--topsail-replot {replot}: pytest took the rootdir ({config.rootpath}) from this directory, so the "
            f"suites cannot be found; write --topsail-replot={replot}, or name the suite too (e.g. suites/scale)")
    from pytest_topsail.xdist_role import role_of

    if not role_of(config).is_worker:
        config.pluginmanager.register(ReportPlugin(config), "topsail-report-session")


def _rootdir_taken_from_replot(config: pytest.Config, replot: Path) -> bool:
    """pytest chooses the rootdir before plugin options are known, so the value of ``--topsail-replot DIR`` (two
    words) counts as a test path; with no other path given and no ini file above DIR, the rootdir is then DIR's
    ancestor and the suites are not found."""
    if "--topsail-replot" not in config.invocation_params.args:
        return False
    return config.args_source != pytest.Config.ArgsSource.ARGS and config.inipath is None


@pytest.fixture
def kpis(request: pytest.FixtureRequest) -> Iterator[KpiRecorder]:
    """Record KPI values and figures of this test: ``kpis.record(name, value)``, ``kpis.record_from(data)``,
    ``kpis.add_figure(title, figure)``, ``kpis.labels(**labels)``."""
    from pytest_topsail.contention import ContentionSampler
    from pytest_topsail.items import ITEM_RECORD_KEY
    from pytest_topsail.kpi import KpiRecorder, SuiteKpis
    from pytest_topsail.suites import suite_of_item

    record = request.node.stash.get(ITEM_RECORD_KEY, None)
    if record is None:
        pytest.fail(f"kpis fixture: {request.node.nodeid} is not an item of a topsail suite", pytrace=False)
    try:
        suite = suite_of_item(request.node)
        suite_kpis = suite_kpis_of(request.config, suite.path / "kpis.py") if suite else SuiteKpis(None, {})
    except TopsailError as error:
        pytest.fail(str(error), pytrace=False)
    directory = record.directory
    item = request.node
    recorder = KpiRecorder(record, suite_kpis, test_uuid=_test_uuid(directory),
                           hook_labels=lambda: _hook_labels(item))
    contention = ContentionSampler().start()
    yield recorder
    recorder.machine_load(contention.stop())
    if directory is not None and record.kpis:
        recorder.write_json(directory)


def _test_uuid(directory: Path | None) -> str | None:
    """The item's uuid, kept in ``<artifact_dir>/.uuid`` (written when missing)."""
    import uuid

    if directory is None:
        return None
    path = directory / UUID_FILE
    if path.is_file():
        return path.read_text(encoding="utf-8").strip() or None
    value = str(uuid.uuid4())
    path.write_text(value + "\n", encoding="utf-8")
    return value


def _hook_labels(item: pytest.Item) -> dict[str, Any]:
    labels: dict[str, Any] = {}
    for result in item.config.hook.pytest_topsail_labels(item=item):
        if result:
            labels.update(result)
    return labels


@dataclass(eq=False, repr=False)  # no field repr: signal.signal() reprs its previous handler, our bound _sigterm,
class ReportPlugin:               # in every signals_held(); with the results in it, that grew with the run (O(n^2))
    """Controller-side hooks (one per session); each dispatches to a collaborator."""

    config: pytest.Config
    results: Results = field(default_factory=Results)
    context: ReportContext = field(init=False)
    history: HistoryIndex = field(init=False)
    items: ItemOutputs = field(init=False)
    outputs: SessionOutputs = field(init=False)
    previous_sigterm: Any = None

    def __post_init__(self) -> None:
        self.context = ReportContext(self.config, self.results.problems, self.results.errors)
        self.history = HistoryIndex(self.context)
        self.items = ItemOutputs(self.config, self.results, self.context, self.history)
        self.outputs = SessionOutputs(self.config, self.results, self.context, self.history)

    # ------------------------------------------------------------ an interrupted run still reports

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """SIGTERM (a CI time limit, ``timeout``, ``kill``) stops the run as Ctrl-C does: the items that finished
        are reported. Only in the main thread of the main interpreter, where Python delivers signals."""
        import threading

        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, self._sigterm)
            self.previous_sigterm = signal.SIG_DFL if previous is None else previous

    def _sigterm(self, signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, self.previous_sigterm)  # a second SIGTERM ends the process at once
        raise Terminated("SIGTERM")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self.previous_sigterm)
            self.previous_sigterm = None

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        if isinstance(excinfo.value, Terminated):
            self.results.interrupted = "SIGTERM"
        elif isinstance(excinfo.value, pytest.Session.Interrupted):  # stopped by the run itself (-x, a preparation)
            self.results.interrupted = str(excinfo.value)
        else:
            self.results.interrupted = "SIGINT (Ctrl-C)"

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.results.expected = len(session.items)

    # ------------------------------------------------------------ per report: junit, teamcity

    @pytest.hookimpl(tryfirst=True)  # before junitxml, pytest-html and teamcity read the teardown report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        record = getattr(report, "topsail", None)
        if record is None:
            return
        from pytest_topsail.report import junit, teamcity

        with signals_held():  # an item that finished is kept whole, however early Ctrl-C comes
            verdicts = self.items.process(record)
            junit.add_item(self.config, report, record, verdicts)
            teamcity.add_item(self.config, report, record, verdicts)

    # ------------------------------------------------------------ pytest-html

    def suites_in_scope(self) -> bool:
        from pytest_topsail.run import STATE_KEY

        state = self.config.stash.get(STATE_KEY, None)
        return bool(state and state.in_scope) or bool(self.config.getoption("topsail_replot", None))

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        if self.suites_in_scope():
            from pytest_topsail.report.pytest_html import header_cells

            cells.extend(header_cells())

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        if self.suites_in_scope():
            from pytest_topsail.report.pytest_html import row_cells

            record, verdicts = self.results.by_nodeid.get(report.nodeid, (None, []))
            cells.extend(row_cells(record, verdicts, self.html_dir(), self.outputs.report_path()))

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list[str], summary: list[str], postfix: list[str]) -> None:
        if self.results.records:
            from pytest_topsail.report.pytest_html import summary_lines

            prefix.extend(summary_lines(self.results.summary.get("message", ""), self.html_dir(),
                                        self.outputs.report_path()))

    def html_dir(self) -> Path:
        html = getattr(self.config.option, "htmlpath", None) or "report.html"
        return (Path(self.config.invocation_params.dir) / html).resolve().parent

    # ------------------------------------------------------------ replot

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> bool | None:
        if not self.config.getoption("topsail_replot", None):
            return None
        session.items = []
        session.testscollected = 0
        return True

    # ------------------------------------------------------------ session end

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        replot = self.config.getoption("topsail_replot", None)
        if replot:
            self.items.replot(Path(replot))
        if not self.results.records:
            if self.results.errors:  # a replot where nothing could be replotted
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        if exitstatus == pytest.ExitCode.INTERRUPTED and not self.results.interrupted:
            self.results.interrupted = "interrupted"
        if session.shouldstop and not self.results.interrupted:
            self.results.interrupted = str(session.shouldstop)
        self.outputs.write_all()
        if self.results.failing or self.results.errors:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif replot and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK

    @pytest.hookimpl(trylast=True)  # after the engine's artifacts line: the verdict line closes the summary
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        results = self.results
        if not results.records and not results.problems:
            return
        from pytest_topsail.report.terminal import write_summary

        write_summary(terminalreporter, results, verbosity=self.config.get_verbosity())


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive inside the block are delivered at its end, to the handlers in place before it.
    Processing an item's record takes up to a second or two for the first one (imports, history, git): a Ctrl-C then
    lost that record on an xdist controller. Outside the main thread (no signal handlers there) it does nothing."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {number: signal.signal(number, lambda received, _frame: held.append(received))
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)
        for received in dict.fromkeys(held):
            signal.raise_signal(received)


class Terminated(KeyboardInterrupt):
    """SIGTERM received: pytest stops as on Ctrl-C (teardown, then the outputs of the items that finished)."""

