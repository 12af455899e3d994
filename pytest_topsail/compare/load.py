"""The runs a comparison reads: an artifacts directory of one run (its items' ``item.json``), a directory holding
many (each of its subdirectories that is one, in name order), or a run id of the history. Each item keeps its case
settings (what items are matched by), the labels of its KPIs, its KPI records by name and its directory (where its
suite's ``samples(artifact_dir)`` finds the raw samples). A bad argument is a TopsailError naming it."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from pytest_topsail.config import load_yaml
from pytest_topsail.errors import TopsailError
from pytest_topsail.items import ItemRecord
from pytest_topsail.kpi import SuiteKpis, load_suite_kpis
from pytest_topsail.regression import RegressionSettings
from pytest_topsail.report.context import DEFAULT_HISTORY

ITEM_FILE = "item.json"
SUITE_CONFIG = "config.yaml"  # the suite's effective configuration, saved at <run>/<suite>/config.yaml


@dataclass
class RunItem:
    """One item of a run: its record (from the history: suite, test id and KPIs only), case settings (None from the
    history), labels and KPIs by name."""

    record: ItemRecord
    settings: dict[str, Any] | None
    labels: dict[str, Any]
    kpis: dict[str, dict[str, Any]]
    directory: Path | None = None
    samples: dict[str, np.ndarray] | None = None  # read once (item_samples)

    @property
    def suite(self) -> str:
        return self.record.suite

    @property
    def test_id(self) -> str:
        return self.record.test_id

    def key(self, by_settings: bool) -> str:
        """What matches it with an item of another run: the suite, the test function and the case settings (or
        the test id, when a run comes from the history and has no settings)."""
        if by_settings and self.settings is not None:
            return json.dumps([self.suite, self.test_id.split("[")[0], self.settings], sort_keys=True, default=str)
        return json.dumps([self.suite, self.test_id])


@dataclass
class Run:
    """A run: its name (the directory's, or the run id), where it was read, its items and each suite's
    effective configuration (empty from the history)."""

    name: str
    source: str
    items: list[RunItem]
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def run_ids(self) -> set[str]:
        """The run ids its KPI records carry (what the history knows it by)."""
        return {str(k["run_id"]) for item in self.items for k in item.kpis.values() if k.get("run_id")}

    @property
    def has_settings(self) -> bool:
        return all(item.settings is not None for item in self.items)


def load_runs(argument: str, history: Path | None = None) -> list[Run]:
    """The runs an argument names: an artifacts directory (one run), a directory of runs (all of them, by name),
    or a run id of the history file (``.topsail/history.sqlite`` by default)."""
    path = Path(argument)
    if path.is_dir():
        if is_run_directory(path):
            return [load_artifacts(path)]
        runs = [load_artifacts(child) for child in sorted(path.iterdir()) if is_run_directory(child)]
        if not runs:
            raise TopsailError(f"{path}: no run in this directory (no <suite>/<item>/{ITEM_FILE} in it or in its "
                               "subdirectories)")
        return runs
    history = history or Path(DEFAULT_HISTORY)
    if path.exists():
        raise TopsailError(f"{path}: not a directory: an artifacts directory, a directory of runs or a run id expected")
    if not history.is_file():
        raise TopsailError(f"{argument}: no such artifacts directory, and no history file {history} to find it as a "
                           "run id in")
    return [load_history_run(argument, history)]


def is_run_directory(path: Path) -> bool:
    return any(path.glob(f"*/*/{ITEM_FILE}"))


def load_artifacts(path: Path) -> Run:
    items, configs = [], {}
    for item_file in sorted(path.glob(f"*/*/{ITEM_FILE}")):
        record = read_item(item_file)
        labels = {**next((k.get("labels") or {} for k in record.kpis if (k.get("scope") or "item") == "item"), {}),
                  **record.labels}
        items.append(RunItem(record=record, settings=record.settings if record.case else None, labels=labels,
                             kpis={k["name"]: k for k in record.kpis}, directory=item_file.parent))
        if record.suite not in configs:
            configs[record.suite] = read_config(path / record.suite / SUITE_CONFIG)
    return Run(name=path.name, source=str(path), items=items, configs=configs)


def read_item(path: Path) -> ItemRecord:
    try:
        return ItemRecord.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError, ValueError) as error:
        raise TopsailError(f"{path}: not an item record: {error}") from None


def read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    document = load_yaml(path)
    return document if isinstance(document, dict) else {}


def load_history_run(run_id: str, history: Path) -> Run:
    from pytest_topsail.history import open_history

    store = open_history(history)
    try:
        records = [r for r in store.records() if r.get("run_id") == run_id]
    finally:
        store.close()
    if not records:
        raise TopsailError(f"{run_id}: no such artifacts directory, and no run with this id in {history}")
    by_item: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_item[(str(record.get("suite")), str(record.get("test_id") or record.get("nodeid")))].append(record)
    items = [RunItem(record=ItemRecord(suite=suite, nodeid=str(kpis[0].get("nodeid") or test_id), test_id=test_id,
                                       kpis=kpis),
                     settings=None, labels=dict(kpis[0].get("labels") or {}), kpis={k["name"]: k for k in kpis})
             for (suite, test_id), kpis in sorted(by_item.items())]
    return Run(name=run_id, source=f"{history} (run {run_id})", items=items)


def regression_settings(suite: str, runs: list[Run], suites_dir: Path) -> RegressionSettings:
    """The suite's ``regression:`` settings: from the first run that saved its configuration, else from
    ``<suites_dir>/<suite>/config.yaml``, else the defaults."""
    section = next((run.configs[suite].get("regression") for run in runs if run.configs.get(suite)), None)
    if section is None:
        section = read_config(suites_dir / suite / SUITE_CONFIG).get("regression")
    return RegressionSettings.from_mapping(section, where=f"suite {suite}: regression")


@cache
def suite_kpis(path: Path) -> SuiteKpis:
    return load_suite_kpis(path)


def item_samples(item: RunItem, suites_dir: Path) -> dict[str, np.ndarray]:
    """The item's raw samples by metric (its suite's ``samples(artifact_dir)``, read once), {} without them."""
    if item.samples is None:
        read = suite_kpis((suites_dir / item.suite / "kpis.py").resolve()).samples
        found = read(item.directory) if read is not None and item.directory is not None else {}
        item.samples = {name: np.asarray(values, dtype=float) for name, values in found.items() if len(values)}
    return item.samples
