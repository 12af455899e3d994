"""The report context of a session (controller side): what the reporting needs of each suite, resolved once per
session from its loaded configuration and passed down (``ReportContext.suite(name)``): where its history is kept,
its regression settings and acknowledgements file, its presets, its ``report:`` and ``lts.strict`` settings and its
``kpis.py``. A suite that cannot be loaded gets the defaults, and one problem line says so.

Also the one cache of the suites' ``kpis.py`` per session (``suite_kpis_of``), which the ``kpis`` fixture reads
on the process that runs the item.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_topsail.errors import TopsailError

if TYPE_CHECKING:
    from pytest_topsail.kpi import SuiteKpis
    from pytest_topsail.regression import RegressionSettings

DEFAULT_HISTORY = ".topsail/history.sqlite"
KPIS_FILE = "kpis.py"
SUITE_KPIS_KEY = pytest.StashKey[dict[Path, "SuiteKpis"]]()


def suite_kpis_of(config: pytest.Config, path: Path) -> SuiteKpis:
    """The suite's ``kpis.py`` at `path`, loaded once per session."""
    from pytest_topsail.kpi import load_suite_kpis

    cache = config.stash.setdefault(SUITE_KPIS_KEY, {})
    if path not in cache:
        cache[path] = load_suite_kpis(path)
    return cache[path]


@dataclass
class SuiteReport:
    """What the reporting needs of one suite (the defaults when it does not load: ``error`` says why)."""

    name: str
    regression: RegressionSettings
    history_location: str  # a SQLite file path, or "opensearch"
    opensearch: dict[str, Any] = field(default_factory=dict)  # history.opensearch
    presets: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # the effective configuration (secrets in it unredacted)
    report_settings: dict[str, Any] = field(default_factory=dict)  # report: headline_kpis, dimensions
    lts_strict: bool = False
    path: Path | None = None  # the suite's directory
    ack_file: Path | None = None
    error: str | None = None  # why the suite did not load

    def kpis(self, config: pytest.Config) -> SuiteKpis:
        """The suite's ``kpis.py`` (a TopsailError when the suite did not load or its kpis.py does not)."""
        if self.path is None:
            raise TopsailError(self.error or f"suite {self.name!r} not loaded")
        return suite_kpis_of(config, self.path / KPIS_FILE)


@dataclass(eq=False)
class ReportContext:
    """Each suite's ``SuiteReport``, resolved on first use; problems (a suite that cannot be loaded: defaults used)
    and errors (invalid regression settings: the session fails) go to the lists given."""

    config: pytest.Config
    problems: list[str]
    errors: list[str]
    suites: dict[str, SuiteReport] = field(default_factory=dict)

    def suite(self, name: str) -> SuiteReport:
        if name not in self.suites:
            self.suites[name] = self._resolve(name)
        return self.suites[name]

    def _resolve(self, name: str) -> SuiteReport:
        from pytest_topsail.regression import RegressionSettings
        from pytest_topsail.suites import load_suite

        try:
            suite = load_suite(self.config, name)
        except TopsailError as error:
            self.problems.append(f"suite {name}: {error}; default regression settings used")
            return SuiteReport(name=name, regression=RegressionSettings(), history_location=self.location(None),
                               error=str(error))
        config = suite.config
        try:
            regression = RegressionSettings.from_mapping(config.get("regression", {}),
                                                         where=f"suite {name}: regression")
        except TopsailError as error:
            self.errors.append(f"{error}; default regression settings used")
            regression = RegressionSettings()
        report_settings = config.get("report", {})
        return SuiteReport(
            name=name, regression=regression, history_location=self.location(config.get("history.location", None)),
            opensearch=config.get("history.opensearch", {}) or {}, presets=list(suite.presets_applied),
            config=config.as_dict(), report_settings=report_settings if isinstance(report_settings, dict) else {},
            lts_strict=config.get("lts.strict", False) is True, path=suite.path,
            ack_file=suite.path / regression.ack_file)

    def location(self, configured: str | None) -> str:
        """``--topsail-history`` (relative to the current directory), else the suite's ``history.location``
        (relative to the rootdir), else the default file under the rootdir; or ``opensearch``."""
        option = self.config.getoption("topsail_history", None)
        if option:
            return option if option == "opensearch" else str(Path(self.config.invocation_params.dir) / option)
        if configured == "opensearch":
            return configured
        return str(Path(self.config.rootpath) / (configured or DEFAULT_HISTORY))
