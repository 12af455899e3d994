"""The history side of a session: each suite's history store, the earlier records indexed by (KPI, comparable
labels) with acknowledgements applied, and the storing of this run's KPIs at the end (the suites' settings: the
report context)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_topsail.errors import TopsailError

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord
    from pytest_topsail.regression import RegressionSettings, Verdict
    from pytest_topsail.report.context import ReportContext


@dataclass
class SuiteIndex:
    """The earlier records of one suite indexed by (KPI, comparable labels), acknowledgements applied."""

    by_key: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    # (test_uuid, KPI) of records this run already stored: a resumed run's (``pytest_topsail.resume``) stopped part,
    # when it ended cleanly enough to store its KPIs; they are not its own history, nor stored twice
    this_run: set[tuple[Any, str]] = field(default_factory=set)


@dataclass(eq=False)
class HistoryIndex:
    """Per suite: its history store and indexed history, loaded on first use; each suite's settings come from the
    report context. Errors (a store that cannot be written: the session fails) go to the context's list."""

    context: ReportContext
    indexes: dict[str, SuiteIndex] = field(default_factory=dict)
    stores: dict[str, Any] = field(default_factory=dict)

    def settings(self, suite: str) -> RegressionSettings:
        return self.context.suite(suite).regression

    def locations(self) -> list[str]:
        return sorted({suite.history_location for suite in self.context.suites.values()})

    def store(self, location: str, suite: str) -> Any:
        from pytest_topsail.history import open_history

        key = f"opensearch of suite {suite}" if location == "opensearch" else location  # settings are per suite
        if key not in self.stores:
            self.stores[key] = open_history(location, self.context.suite(suite).opensearch)
        return self.stores[key]

    def history_for(self, suite: str, kpi: dict[str, Any]) -> list[dict[str, Any]]:
        from pytest_topsail.history.acks import apply_acks, load_ack_file
        from pytest_topsail.regression import history_key

        settings = self.context.suite(suite)
        if suite not in self.indexes:
            index = self.indexes[suite] = SuiteIndex()
            records = self.store(settings.history_location, suite).records(suite)
            if settings.ack_file is not None:
                apply_acks(records, load_ack_file(settings.ack_file), str(settings.ack_file))
            run_id = self.run_id()
            for old in records:
                if run_id is not None and old.get("run_id") == run_id:
                    index.this_run.add((old.get("test_uuid"), old["name"]))
                    continue
                key = (old["name"], history_key(old.get("labels") or {}, settings.regression))
                index.by_key.setdefault(key, []).append(old)
        return self.indexes[suite].by_key.get((kpi["name"], history_key(kpi.get("labels") or {},
                                                                        settings.regression)), [])

    def run_id(self) -> str | None:
        """This session's run id (a replot's is new: its records keep the runs they came from)."""
        from pytest_topsail.resume import reported_run_id
        from pytest_topsail.run import STATE_KEY

        return reported_run_id(self.context.config) if STATE_KEY in self.context.config.stash else None

    def judge(self, suite: str, kpis: list[dict[str, Any]]) -> list[Verdict]:
        """Verdicts of KPI records of one suite, their change points computed in one batch."""
        from pytest_topsail.regression import judge_many

        return judge_many([(kpi, self.history_for(suite, kpi)) for kpi in kpis], self.settings(suite))

    def store_run(self, records: list[ItemRecord], verdicts: list[Verdict]) -> None:
        """The KPIs of passed items, each with its verdict (those excluded for a fault: none): a regression stays
        out of later baselines until acknowledged. Closes the stores."""
        statuses = {(v.test_uuid, v.kpi): v.status for v in verdicts}
        by_store: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for record in records:
            if record.outcome != "passed" or not record.kpis:
                continue  # a failed test's KPIs would poison the history
            for entry in record.kpis:
                entry["verdict"] = statuses.get((entry.get("test_uuid"), entry["name"]), entry.get("verdict"))
            location = self.context.suite(record.suite).history_location
            stored = self.indexes[record.suite].this_run if record.suite in self.indexes else set()
            by_store.setdefault((location, record.suite), []).extend(
                entry for entry in record.kpis if (entry.get("test_uuid"), entry["name"]) not in stored
                and not entry.get("excluded"))  # measured through a fault: shown with why, no history point
        for (location, suite), kpis in by_store.items():
            try:
                self.store(location, suite).add(kpis)
            except TopsailError as error:
                self.context.errors.append(str(error))
        for store in self.stores.values():
            store.close()
        self.stores.clear()
