"""Per item (controller side): its KPIs completed with labels and run metadata, judged against history, and its
files written into its artifact directory: ``item.json`` (the record, what a replot reads), ``kpis.json`` and
``lts.json`` (the long-term-storage payload)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.report.context import ReportContext
from pytest_topsail.report.history_index import HistoryIndex
from pytest_topsail.report.results import Results

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord
    from pytest_topsail.regression import Verdict


@dataclass(eq=False)
class ItemOutputs:
    config: pytest.Config
    results: Results
    context: ReportContext
    history: HistoryIndex
    git_sha: str | None = None  # "" when unknown
    scope_keys: set[str] = field(default_factory=set)  # worker/run-scoped KPIs already recorded this run

    def process(self, record: ItemRecord, *, reused: bool = False) -> list[Verdict]:
        """Judge one item's record and add it to the results; its files are written unless `reused` (a record of a
        resumed run's finished item, read from them: ``pytest_topsail.resume``)."""
        from pytest_topsail.kpi import flatten_labels

        suite = record.suite
        run = self.run_metadata(suite)
        for entry in record.kpis:
            entry["labels"] = {**flatten_labels(record.labels), **(entry.get("labels") or {})}
            for key, value in run.items():
                entry.setdefault(key, value)  # a replotted record keeps the run it came from
        from pytest_topsail.regression import once_per_scope

        record.kpis, shared = once_per_scope(record.kpis, self.scope_keys)
        if shared:  # measured per worker or run and already recorded by an earlier item: judged and shown there
            record.shared_kpis = shared
        verdicts = []
        try:
            verdicts = self.history.judge(suite, record.kpis)
        except TopsailError as error:
            self.results.errors.append(str(error))
        self.results.add(record, verdicts)
        self.results.problems.extend(f"{record.nodeid}: {warning}" for warning in record.warnings)
        if not reused:
            self.write_files(record)
        return verdicts

    def replot(self, root: Path) -> None:
        """``--topsail-replot``: the items saved under ``root``, parsed again by their suite's kpis.py when it
        still loads (else their saved KPIs), each processed as if it had just run."""
        from pytest_topsail.metrics.collect import replot as metric_kpis
        from pytest_topsail.report.replot import load_items, reparse

        problems = self.results.problems
        records = load_items(root, problems)
        if not records:
            self.results.errors.append(f"--topsail-replot {root}: nothing could be replotted (problems listed)")
        for record in records:
            try:
                suite_kpis = self.context.suite(record.suite).kpis(self.config)
            except TopsailError as error:
                problems.append(f"{record.artifact_dir}: suite {record.suite!r} not loaded ({error}); "
                                "saved KPIs used")
            else:
                saved = list(record.kpis)
                if suite_kpis.parse is not None:
                    reparse(record, suite_kpis, suite_kpis.parse, problems)
                metric_kpis(record, saved, suite_kpis)  # metric KPIs and figures from the saved series (metrics/)
            self.process(record)

    def run_metadata(self, suite: str) -> dict[str, Any]:
        """What each KPI record of this session carries into the history: run id, presets, git sha when known."""
        from pytest_topsail.resume import reported_run_id

        if self.config.getoption("topsail_replot", None):
            return {}
        if self.git_sha is None:
            self.git_sha = _git_sha(Path(self.config.rootpath))
        return {"run_id": reported_run_id(self.config), "presets": list(self.context.suite(suite).presets),
                "git_sha": self.git_sha or None}

    def write_files(self, record: ItemRecord) -> None:
        from pytest_topsail.lts import build_payload

        directory = record.directory
        if directory is None or not directory.is_dir():
            return
        write = self.results.write
        if not write(directory / "item.json", json.dumps(record.to_dict(), indent=2, sort_keys=True, default=str)):
            return
        if not record.kpis:
            return
        if not write(directory / "kpis.json", json.dumps(record.kpis, indent=2, sort_keys=True)):
            return
        suite = self.context.suite(record.suite)
        try:
            payload = build_payload(record, presets=suite.presets, config=suite.config, strict=suite.lts_strict)
        except TopsailError as error:
            self.results.errors.append(str(error))
            return
        write(directory / "lts.json", json.dumps(payload, indent=2, sort_keys=True, default=str))


def _git_sha(directory: Path) -> str:
    """The commit of the project under test, "" when it is not a git checkout (or git is missing)."""
    import subprocess

    try:
        answer = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True,
                                timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return answer.stdout.strip() if answer.returncode == 0 else ""
