"""pytest hooks of the reporting pipeline (registered by pytest_topsail.plugin).

Worker or single process: the ``kpis`` fixture fills the item record; KPI values become junit properties.
Controller or single process: each teardown report's ``report.topsail`` is judged against history at once (so the
verdicts reach junit with the report), and at session end the KPIs are stored and the outputs written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_topsail.errors import TopsailError

if TYPE_CHECKING:  # kpi and regression import pydantic and numpy: only loaded when a suite reports
    from pytest_topsail.kpi import KpiRecorder, SuiteKpis
    from pytest_topsail.regression import RegressionSettings, Verdict

DEFAULT_HISTORY = ".topsail/history.sqlite"
REPORT_FILE = "report.html"
UUID_FILE = ".uuid"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("topsail", "pytest-topsail (performance and scale suites)")
    group.addoption("--topsail-history", dest="topsail_history", default=None, metavar="PATH",
                    help="KPI history: a SQLite file (default: the suite's history.location, else "
                         f"<rootdir>/{DEFAULT_HISTORY}) or 'opensearch' (settings under history.opensearch)")
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
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(ReportSession(config), "topsail-report-session")


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
    directory = Path(record["artifact_dir"]) if record.get("artifact_dir") else None
    item = request.node
    recorder = KpiRecorder(record, suite_kpis, test_uuid=_test_uuid(directory),
                           hook_labels=lambda: _hook_labels(item))
    yield recorder
    if directory is not None and record["kpis"]:
        recorder.write_json(directory)


SUITE_KPIS_KEY = pytest.StashKey[dict[Path, "SuiteKpis"]]()


def suite_kpis_of(config: pytest.Config, path: Path) -> SuiteKpis:
    from pytest_topsail.kpi import load_suite_kpis

    cache = config.stash.setdefault(SUITE_KPIS_KEY, {})
    if path not in cache:
        cache[path] = load_suite_kpis(path)
    return cache[path]


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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """KPI values as report properties: on the teardown report for junit (which reads only that one), on the
    call report for pytest-html's row. Added to the reports, never to ``item.user_properties``."""
    report = yield
    if call.when in ("call", "teardown"):
        from pytest_topsail.items import ITEM_RECORD_KEY

        record = item.stash.get(ITEM_RECORD_KEY, None)
        if record and record.get("kpis"):
            from pytest_topsail.report.junit import kpi_properties

            report.user_properties.extend(kpi_properties(record["kpis"]))
    return report


@dataclass
class SuiteHistory:
    settings: RegressionSettings
    store_location: str
    index: dict[tuple[str, str], list[dict[str, Any]]] | None = None


@dataclass(eq=False)
class ReportSession:
    """Controller-side state and hooks (one per session)."""

    config: pytest.Config
    records: list[dict[str, Any]] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    suites: dict[str, SuiteHistory] = field(default_factory=dict)
    stores: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------ suite settings and history

    def suite_config(self, suite: str) -> Any | None:
        from pytest_topsail.suites import load_suite

        try:
            return load_suite(self.config, suite).config
        except TopsailError as error:
            self.problems.append(f"suite {suite}: {error}; default regression settings used")
            return None

    def suite_history(self, suite: str) -> SuiteHistory:
        from pytest_topsail.regression import RegressionSettings

        if suite not in self.suites:
            config = self.suite_config(suite)
            regression = config.get("regression", {}) if config is not None else {}
            try:
                settings = RegressionSettings.from_mapping(regression, where=f"suite {suite}: regression")
            except TopsailError as error:
                self.errors.append(f"{error}; default regression settings used")
                settings = RegressionSettings()
            self.suites[suite] = SuiteHistory(settings=settings, store_location=self.history_location(config))
        return self.suites[suite]

    def history_location(self, config: Any | None) -> str:
        """``--topsail-history`` (relative to the current directory), else the suite's ``history.location``
        (relative to the rootdir), else the default file under the rootdir; or ``opensearch``."""
        option = self.config.getoption("topsail_history", None)
        if option:
            return option if option == "opensearch" else str(Path(self.config.invocation_params.dir) / option)
        configured = config.get("history.location", None) if config is not None else None
        if configured == "opensearch":
            return configured
        return str(Path(self.config.rootpath) / (configured or DEFAULT_HISTORY))

    def store(self, location: str, suite: str) -> Any:
        from pytest_topsail.history import open_history

        key = f"opensearch of suite {suite}" if location == "opensearch" else location  # settings are per suite
        if key not in self.stores:
            config = self.suite_config(suite)
            opensearch = config.get("history.opensearch", {}) if config is not None else {}
            self.stores[key] = open_history(location, opensearch)
        return self.stores[key]

    def history_for(self, suite: str, kpi: dict[str, Any]) -> list[dict[str, Any]]:
        from pytest_topsail.regression import history_key

        history = self.suite_history(suite)
        if history.index is None:
            history.index = {}
            for old in self.store(history.store_location, suite).records(suite):
                key = (old["name"], history_key(old.get("labels") or {}, history.settings))
                history.index.setdefault(key, []).append(old)
        return history.index.get((kpi["name"], history_key(kpi.get("labels") or {}, history.settings)), [])

    # ------------------------------------------------------------ per item

    def process(self, record: dict[str, Any]) -> list[Verdict]:
        from pytest_topsail.kpi import flatten_labels
        from pytest_topsail.regression import judge

        suite = record["suite"]
        for entry in record.get("kpis") or []:
            entry["labels"] = {**flatten_labels(record.get("labels") or {}), **(entry.get("labels") or {})}
        verdicts = []
        try:
            for entry in record.get("kpis") or []:
                verdicts.append(judge(entry, self.history_for(suite, entry), self.suite_history(suite).settings))
        except TopsailError as error:
            self.errors.append(str(error))
        self.records.append(record)
        self.verdicts.extend(verdicts)
        self.write_item_files(record)
        return verdicts

    def write_item_files(self, record: dict[str, Any]) -> None:
        from pytest_topsail.lts import build_payload

        if not record.get("artifact_dir") or not Path(record["artifact_dir"]).is_dir():
            return
        directory = Path(record["artifact_dir"])
        if not self.write_output(directory / "item.json", json.dumps(record, indent=2, sort_keys=True, default=str)):
            return
        if not record.get("kpis"):
            return
        if not self.write_output(directory / "kpis.json", json.dumps(record["kpis"], indent=2, sort_keys=True)):
            return
        config = self.suite_config(record["suite"])
        try:
            payload = build_payload(
                record, presets=self._presets(record["suite"]), config=config.as_dict() if config else {},
                strict=bool(config.get("lts.strict", False)) if config else False)
        except TopsailError as error:
            self.errors.append(str(error))
            return
        self.write_output(directory / "lts.json", json.dumps(payload, indent=2, sort_keys=True, default=str))

    def _presets(self, suite: str) -> list[str]:
        from pytest_topsail.suites import load_suite

        try:
            return list(load_suite(self.config, suite).presets_applied)
        except TopsailError:
            return []

    # ------------------------------------------------------------ pytest-html (optional)

    def suites_in_scope(self) -> bool:
        from pytest_topsail.suites import STATE_KEY

        state = self.config.stash.get(STATE_KEY, None)
        return bool(state and state.in_scope) or bool(self.config.getoption("topsail_replot", None))

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        if self.suites_in_scope():
            cells.append("<th>KPIs</th>")

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        if not self.suites_in_scope():
            return
        import html

        values = [f"{name.split('.', 1)[1]}={value}" for name, value in getattr(report, "user_properties", [])
                  if str(name).startswith(("kpi.", "verdict."))]
        cells.append(f"<td>{html.escape('; '.join(values))}</td>")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        record = getattr(report, "topsail", None)
        if not isinstance(record, dict):
            return
        from pytest_topsail.report.junit import verdict_properties

        verdicts = self.process(record)
        report.user_properties.extend(verdict_properties(verdicts))

    # ------------------------------------------------------------ replot

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> bool | None:
        if not self.config.getoption("topsail_replot", None):
            return None
        session.items = []
        session.testscollected = 0
        return True

    def replot(self, root: Path) -> None:
        from pytest_topsail.report.replot import load_items, reparse
        from pytest_topsail.suites import load_suite

        for record in load_items(root, self.problems):
            try:
                suite = load_suite(self.config, record["suite"])
                suite_kpis = suite_kpis_of(self.config, suite.path / "kpis.py")
                parse = suite_kpis.parse
            except TopsailError as error:
                self.problems.append(f"{record['artifact_dir']}: suite {record['suite']!r} not loaded ({error}); "
                                     "saved KPIs used")
                suite_kpis, parse = None, None
            if suite_kpis is not None and parse is not None:
                reparse(record, suite_kpis, parse, self.problems)
            self.process(record)

    # ------------------------------------------------------------ session end

    def artifacts_root(self) -> Path:
        from pytest_topsail.suites import state_of

        return state_of(self.config).artifacts_root

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        replot = self.config.getoption("topsail_replot", None)
        if replot:
            self.replot(Path(replot))
        if not self.records:
            return
        import yaml

        from pytest_topsail.regression import summarize
        from pytest_topsail.report.openmetrics import render

        kpis = [k for r in self.records for k in r.get("kpis") or []]
        self.store_history()
        self.summary = summarize(self.verdicts, total_points=len(kpis))
        root = Path(replot) if replot else self.artifacts_root()
        if self.write_output(root / "kpis.prom", render(kpis)):
            self.outputs["KPIs"] = str(root / "kpis.prom")
        if self.write_output(root / "regression_summary.yaml", yaml.safe_dump(self.summary, sort_keys=False)):
            self.outputs["regression summary"] = str(root / "regression_summary.yaml")
        self.write_output(root / "verdicts.json", json.dumps([v.as_dict() for v in self.verdicts], indent=1))
        self.write_report(root)
        for verdict in self.verdicts:
            if verdict.status == "regression" and self.suite_history(verdict.suite).settings.fail_on_regression:
                self.failing.append(verdict.describe())
        if self.failing or self.errors:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif replot and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK

    def write_output(self, path: Path, text: str) -> bool:
        """Write one output file; a failure is one error line (the session fails), the other outputs still come."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as error:
            self.errors.append(f"{path}: cannot be written ({error.strerror or error})")
            return False
        return True

    def store_history(self) -> None:
        by_store: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for record in self.records:
            if record.get("outcome") != "passed" or not record.get("kpis"):
                continue  # a failed test's KPIs would poison the history
            location = self.suite_history(record["suite"]).store_location
            by_store.setdefault((location, record["suite"]), []).extend(record["kpis"])
        for (location, suite), kpis in by_store.items():
            try:
                self.store(location, suite).add(kpis)
            except TopsailError as error:
                self.errors.append(str(error))
        for store in self.stores.values():
            store.close()
        self.stores.clear()

    def all_problems(self) -> list[str]:
        return list(dict.fromkeys(self.problems + self.errors))

    def write_report(self, root: Path) -> None:
        from pytest_topsail.report.html import ReportInput, render_report

        option = self.config.getoption("topsail_report", None)
        path = Path(self.config.invocation_params.dir) / option if option else root / REPORT_FILE
        run_info = {"artifacts": str(root), "generated": _now(), "history": ", ".join(sorted(
            {h.store_location for h in self.suites.values()}))}
        try:
            render_report(ReportInput(title="pytest-topsail report", records=self.records, verdicts=self.verdicts,
                                      summary=self.summary, run_info=run_info,
                                      problems=self.all_problems()), path)
        except OSError as error:
            self.errors.append(f"report {path}: cannot be written ({error})")
            return
        self.outputs["report"] = str(path)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.records and not self.problems:
            return
        from pytest_topsail.report.terminal import write_summary

        write_summary(terminalreporter, self.verdicts, self.summary, self.outputs, self.all_problems(),
                      self.failing, verbose=self.config.get_verbosity() > 0)


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
