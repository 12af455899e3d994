"""The history side of a session: each suite's regression settings, its history store, the earlier records indexed
by (KPI, comparable labels) with acknowledgements applied, and the storing of this run's KPIs at the end."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_topsail.errors import TopsailError

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord
    from pytest_topsail.regression import RegressionSettings, Verdict

DEFAULT_HISTORY = ".topsail/history.sqlite"


@dataclass
class SuiteHistory:
    settings: RegressionSettings
    store_location: str
    ack_file: Path | None = None
    index: dict[tuple[str, str], list[dict[str, Any]]] | None = None


@dataclass(eq=False)
class HistoryIndex:
    """Per suite: settings, store and indexed history, loaded on first use. Problems (a suite that cannot be
    loaded: defaults used) and errors (the session fails) are appended to the lists given."""

    config: pytest.Config
    problems: list[str]
    errors: list[str]
    suites: dict[str, SuiteHistory] = field(default_factory=dict)
    stores: dict[str, Any] = field(default_factory=dict)

    def suite_config(self, suite: str) -> Any | None:
        from pytest_topsail.suites import load_suite

        try:
            return load_suite(self.config, suite).config
        except TopsailError as error:
            self.problems.append(f"suite {suite}: {error}; default regression settings used")
            return None

    def presets(self, suite: str) -> list[str]:
        from pytest_topsail.suites import load_suite

        try:
            return list(load_suite(self.config, suite).presets_applied)
        except TopsailError:
            return []

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
            self.suites[suite] = SuiteHistory(settings=settings, store_location=self.location(config),
                                              ack_file=self._ack_file(suite, settings))
        return self.suites[suite]

    def settings(self, suite: str) -> RegressionSettings:
        return self.suite_history(suite).settings

    def _ack_file(self, suite: str, settings: RegressionSettings) -> Path | None:
        from pytest_topsail.suites import load_suite

        try:
            return load_suite(self.config, suite).path / settings.ack_file
        except TopsailError:
            return None

    def location(self, config: Any | None) -> str:
        """``--topsail-history`` (relative to the current directory), else the suite's ``history.location``
        (relative to the rootdir), else the default file under the rootdir; or ``opensearch``."""
        option = self.config.getoption("topsail_history", None)
        if option:
            return option if option == "opensearch" else str(Path(self.config.invocation_params.dir) / option)
        configured = config.get("history.location", None) if config is not None else None
        if configured == "opensearch":
            return configured
        return str(Path(self.config.rootpath) / (configured or DEFAULT_HISTORY))

    def locations(self) -> list[str]:
        return sorted({history.store_location for history in self.suites.values()})

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

    def judge(self, suite: str, kpis: list[dict[str, Any]]) -> list[Verdict]:
        """Verdicts of KPI records of one suite, their change points computed in one batch."""
        from pytest_topsail.regression import judge_many

        return judge_many([(kpi, self.history_for(suite, kpi)) for kpi in kpis], self.settings(suite))

    def store_run(self, records: list[ItemRecord], verdicts: list[Verdict]) -> None:
        """The KPIs of passed items, each with its verdict: a regression stays out of later baselines until
        acknowledged. Closes the stores."""
        statuses = {(v.test_uuid, v.kpi): v.status for v in verdicts}
        by_store: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for record in records:
            if record.outcome != "passed" or not record.kpis:
                continue  # a failed test's KPIs would poison the history
            for entry in record.kpis:
                entry["verdict"] = statuses.get((entry.get("test_uuid"), entry["name"]), entry.get("verdict"))
            location = self.suite_history(record.suite).store_location
            by_store.setdefault((location, record.suite), []).extend(record.kpis)
        for (location, suite), kpis in by_store.items():
            try:
                self.store(location, suite).add(kpis)
            except TopsailError as error:
                self.errors.append(str(error))
        for store in self.stores.values():
            store.close()
        self.stores.clear()
