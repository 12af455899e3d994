"""pytest hooks of the reporting pipeline (registered by pytest_topsail.plugin).

Worker or single process: the ``kpis`` fixture fills the item record; KPI values become junit properties.
Controller or single process: each teardown report's ``report.topsail`` is judged against history at once (so the
verdicts reach junit with the report), and at session end the KPIs are stored and the outputs written.
"""

from __future__ import annotations

import json
import re
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


@dataclass
class SuiteHistory:
    settings: RegressionSettings
    store_location: str
    ack_file: Path | None = None
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
    git_sha: str | None = None  # "" when unknown
    by_nodeid: dict[str, tuple[dict[str, Any], list[Verdict]]] = field(default_factory=dict)

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
            self.suites[suite] = SuiteHistory(settings=settings, store_location=self.history_location(config),
                                              ack_file=self.ack_file(suite, settings))
        return self.suites[suite]

    def ack_file(self, suite: str, settings: RegressionSettings) -> Path | None:
        from pytest_topsail.suites import load_suite

        try:
            return load_suite(self.config, suite).path / settings.ack_file
        except TopsailError:
            return None

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
        from pytest_topsail.history.acks import apply_acks, load_ack_file
        from pytest_topsail.regression import history_key

        history = self.suite_history(suite)
        if history.index is None:
            history.index = {}
            records = self.store(history.store_location, suite).records(suite)
            if history.ack_file is not None:
                apply_acks(records, load_ack_file(history.ack_file), str(history.ack_file))
            for old in records:
                key = (old["name"], history_key(old.get("labels") or {}, history.settings))
                history.index.setdefault(key, []).append(old)
        return history.index.get((kpi["name"], history_key(kpi.get("labels") or {}, history.settings)), [])

    # ------------------------------------------------------------ per item

    def process(self, record: dict[str, Any]) -> list[Verdict]:
        from pytest_topsail.kpi import flatten_labels
        from pytest_topsail.regression import judge

        suite = record["suite"]
        run = self.run_metadata(suite)
        for entry in record.get("kpis") or []:
            entry["labels"] = {**flatten_labels(record.get("labels") or {}), **(entry.get("labels") or {})}
            for key, value in run.items():
                entry.setdefault(key, value)  # a replotted record keeps the run it came from
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

    def run_metadata(self, suite: str) -> dict[str, Any]:
        """What each KPI record of this session carries into the history: run id, presets, git sha when known."""
        from pytest_topsail.suites import state_of

        if self.config.getoption("topsail_replot", None):
            return {}
        if self.git_sha is None:
            self.git_sha = _git_sha(Path(self.config.rootpath))
        return {"run_id": state_of(self.config).run_id, "presets": self._presets(suite),
                "git_sha": self.git_sha or None}

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
                strict=config.get("lts.strict", False) is True if config else False)
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

    # ------------------------------------------------------------ per report: junit, pytest-html, teamcity

    @pytest.hookimpl(tryfirst=True)  # before junitxml, pytest-html and teamcity read the teardown report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        record = getattr(report, "topsail", None)
        if not isinstance(record, dict):
            return
        from pytest_topsail.report import junit, teamcity

        verdicts = self.process(record)
        self.by_nodeid[record["nodeid"]] = (record, verdicts)
        junit.add_item(self.config, report, record, verdicts)
        teamcity.add_item(self.config, report, record, verdicts)

    def suites_in_scope(self) -> bool:
        from pytest_topsail.suites import STATE_KEY

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

            record, verdicts = self.by_nodeid.get(report.nodeid, (None, []))
            cells.extend(row_cells(record, verdicts, self.html_dir(), self.report_path()))

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list[str], summary: list[str], postfix: list[str]) -> None:
        if self.records:
            from pytest_topsail.report.pytest_html import summary_lines

            prefix.extend(summary_lines(self.summary.get("message", ""), self.html_dir(), self.report_path()))

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
        from pytest_topsail.report.junit import add_session

        add_session(self.config, self.summary["message"], self.outputs.get("report"))
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
        """The KPIs of passed items, each with its verdict: a regression stays out of later baselines until
        acknowledged."""
        statuses = {(v.test_uuid, v.kpi): v.status for v in self.verdicts}
        by_store: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for record in self.records:
            if record.get("outcome") != "passed" or not record.get("kpis"):
                continue  # a failed test's KPIs would poison the history
            for entry in record["kpis"]:
                entry["verdict"] = statuses.get((entry.get("test_uuid"), entry["name"]), entry.get("verdict"))
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

    def run_info(self, root: Path) -> dict[str, str]:
        """Run metadata for the report: run id, presets, git sha, cluster shape, versions, where things are."""
        import platform

        from pytest_topsail.kpi import flatten_labels

        first: dict[str, Any] = next((k for r in self.records for k in r.get("kpis") or []), {})
        presets = {suite: ", ".join(self._presets(suite)) or "-" for suite in sorted(self.suites)}
        cluster_labels: dict[str, Any] = next((r["labels"] for r in self.records if r.get("labels")), {})
        cluster = flatten_labels(cluster_labels)
        versions = {"python": platform.python_version(), "pytest": pytest.__version__,
                    "pytest-topsail": _version("pytest-topsail"), "plotly": _version("plotly")}
        return {
            "run": str(first.get("run_id") or "-"),
            "presets": "; ".join(f"{suite}: {names}" for suite, names in presets.items()),
            "git sha": str(first.get("git_sha") or "unknown"),
            "cluster": ", ".join(f"{k}={v}" for k, v in sorted(cluster.items())) or "-",
            "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
            "artifacts": str(root), "generated": _now(),
            "history": ", ".join(sorted({h.store_location for h in self.suites.values()})),
        }

    def report_path(self) -> Path:
        option = self.config.getoption("topsail_report", None)
        if option:
            return Path(self.config.invocation_params.dir) / option
        replot = self.config.getoption("topsail_replot", None)
        return (Path(replot) if replot else self.artifacts_root()) / REPORT_FILE

    def suite_figures(self, root: Path) -> dict[str, list[dict[str, str]]]:
        """Figures of whole suites: ``figures(records)`` of a suite's kpis.py, saved as ``<root>/<suite>/figures/``."""
        from pytest_topsail.suites import load_suite

        by_suite: dict[str, list[dict[str, Any]]] = {}
        for record in self.records:
            by_suite.setdefault(record["suite"], []).append(record)
        saved: dict[str, list[dict[str, str]]] = {}
        for name, records in sorted(by_suite.items()):
            try:
                build = suite_kpis_of(self.config, load_suite(self.config, name).path / "kpis.py").figures
                figures = build(records) if build is not None else {}
            except Exception as error:  # a suite's figure code must not cost the report
                self.problems.append(f"suite {name}: figures() failed ({type(error).__name__}: {error})")
                continue
            folder = root / name / "figures"
            for index, (title, figure) in enumerate(figures.items()):
                folder.mkdir(parents=True, exist_ok=True)
                path = folder / f"{index:02d}_{re.sub(r'[^a-zA-Z0-9]+', '_', title).strip('_')[:60]}.json"
                path.write_text(figure.to_json() if hasattr(figure, "to_json") else json.dumps(figure),
                                encoding="utf-8")
                saved.setdefault(name, []).append({"title": title, "path": str(path)})
        return saved

    def write_report(self, root: Path) -> None:
        from pytest_topsail.report.html import ReportInput, render_report

        path = self.report_path()
        run_info = self.run_info(root)
        try:
            suite_figures = self.suite_figures(root)
            render_report(ReportInput(title="pytest-topsail report", records=self.records, verdicts=self.verdicts,
                                      summary=self.summary, run_info=run_info,
                                      problems=self.all_problems(), suite_figures=suite_figures), path)
        except OSError as error:
            self.errors.append(f"report {path}: cannot be written ({error})")
            return
        self.outputs["report"] = str(path)

    @pytest.hookimpl(trylast=True)  # after the engine's artifacts line: the verdict line closes the summary
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.records and not self.problems:
            return
        from pytest_topsail.report.terminal import write_summary

        write_summary(terminalreporter, self.verdicts, self.summary, self.outputs, self.all_problems(),
                      self.failing, verbosity=self.config.get_verbosity())


def _version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


def _git_sha(directory: Path) -> str:
    """The commit of the project under test, "" when it is not a git checkout (or git is missing)."""
    import subprocess

    try:
        answer = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True,
                                timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return answer.stdout.strip() if answer.returncode == 0 else ""


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
