"""The per-item record (``ItemRecord``): created when a suite item starts, filled during it (the ``kpis`` fixture,
the metrics plugin, ``report_leftover``, ``pytest_topsail_labels``), attached to its teardown report as
``report.topsail``, read by the reporting (verdicts, history, junit, teamcity, the HTML report) and saved as the
item's ``item.json``, which ``--topsail-replot`` reads back.

Typed, with a ``version``: readers use its attributes. It crosses the xdist boundary as its JSON form
(``to_dict``/``from_dict``, in ``pytest_report_to_serializable``/``pytest_report_from_serializable``:
``pytest_topsail.item_context``). The KPI entries stay JSON mappings (they are history records). Schema in
docs/architecture.md; ``from_dict`` reads every version up to ``RECORD_VERSION`` (a saved record without a version
is version 0: the same fields).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.cases import Case
from pytest_topsail.redact import redact

RECORD_VERSION = 1  # 0: the untyped records saved before the version field (the same fields)
SETTINGS_FILE = "settings.yaml"
EXIT_CODE_FILE = "exit_code"
SKIP_FILE = "skip"


@dataclass
class CaseRecord:
    """The item's case: its name, id and settings (secret values redacted)."""

    name: str
    id: str
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class ItemRecord:
    """What one suite item leaves for the reporting (the fields documented in docs/architecture.md)."""

    suite: str
    nodeid: str
    test_id: str
    artifact_dir: str | None = None
    case: CaseRecord | None = None
    outcome: str = "passed"  # across setup, call and teardown: failed wins over skipped wins over passed
    start: float = 0.0  # epoch seconds
    end: float | None = None
    kpis: list[dict[str, Any]] = field(default_factory=list)  # KPI records (the kpis fixture, the metrics plugin)
    figures: list[dict[str, str]] = field(default_factory=list)  # {"title", "path"}: plotly figure JSON files
    labels: dict[str, Any] = field(default_factory=dict)  # extra labels, e.g. from pytest_topsail_labels
    leftovers: list[dict[str, str]] = field(default_factory=list)  # {"what", "command"}: report_leftover
    warnings: list[str] = field(default_factory=list)  # kpis.warn(): shown, the item does not fail for them
    machine_load: float | None = None  # runnable tasks per CPU during the test (pytest_topsail.contention)
    shared_kpis: list[dict[str, Any]] = field(default_factory=list)  # worker/run KPIs recorded by an earlier item
    version: int = RECORD_VERSION

    @property
    def directory(self) -> Path | None:
        return Path(self.artifact_dir) if self.artifact_dir else None

    @property
    def settings(self) -> dict[str, Any]:
        """The case's settings (empty without a case)."""
        return self.case.settings if self.case is not None else {}

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``item.json``, the xdist wire, a suite's ``figures(records)``."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> ItemRecord:
        """A record from its JSON form, of any version up to ``RECORD_VERSION``; a ValueError says what does not
        fit (suite and nodeid strings, KPIs a list of mappings with a name and a numeric value)."""
        if not isinstance(data, dict):
            raise ValueError(f"a mapping expected, got {type(data).__name__}")
        version = data.get("version", 0)
        if not isinstance(version, int) or version > RECORD_VERSION:
            raise ValueError(f"version {version!r}: this pytest-topsail reads item records up to version "
                             f"{RECORD_VERSION}")
        if not isinstance(data.get("suite"), str) or not isinstance(data.get("nodeid"), str):
            raise ValueError("suite and nodeid strings expected")
        kpis = data.get("kpis") or []
        if not isinstance(kpis, list) or not all(is_kpi(kpi) for kpi in kpis):
            raise ValueError("kpis: a list of KPI records with a name and a numeric value expected")
        case = data.get("case")
        known = {f.name: f for f in dataclasses.fields(cls)}
        values = {key: value for key, value in data.items()
                  if key in known and key not in ("case", "version") and value is not None}
        for key, value in values.items():
            factory = known[key].default_factory
            if factory is not dataclasses.MISSING and not isinstance(value, type(factory())):
                raise ValueError(f"{key}: a {type(factory()).__name__} expected, got {type(value).__name__}")
        return cls(**{**values, "kpis": kpis, "test_id": str(data.get("test_id") or data["nodeid"])}, version=version,
                   case=CaseRecord(name=str(case.get("name") or ""), id=str(case.get("id") or ""),
                                   settings=dict(case.get("settings") or {})) if isinstance(case, dict) else None)


def is_kpi(kpi: Any) -> bool:
    return (isinstance(kpi, dict) and isinstance(kpi.get("name"), str) and isinstance(kpi.get("value"), int | float)
            and not isinstance(kpi.get("value"), bool))


ITEM_RECORD_KEY = pytest.StashKey[ItemRecord]()
ITEM_DIR_KEY = pytest.StashKey[Path]()


def case_of_item(item: pytest.Item) -> Case | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    case = callspec.params.get("case")
    return case if isinstance(case, Case) else None


def new_record(item: pytest.Item, suite: str, artifact_dir: Path | None) -> ItemRecord:
    case = case_of_item(item)
    return ItemRecord(
        suite=suite, nodeid=item.nodeid, test_id=item.name,
        artifact_dir=str(artifact_dir) if artifact_dir is not None else None,
        case=CaseRecord(name=case.name, id=case.id, settings=redact(_json_safe(case.settings))) if case else None,
        start=time.time())


def _json_safe(value: Any) -> Any:
    """YAML can hold dates and other non-JSON values; the record must cross the xdist boundary as JSON-like data."""
    return json.loads(json.dumps(value, default=str))


def record_phase(record: ItemRecord, report: pytest.TestReport) -> None:
    """Fold one phase's report into the record's outcome: failed wins over skipped wins over passed."""
    if report.failed:
        record.outcome = "failed"
    elif report.skipped and record.outcome == "passed":
        record.outcome = "skipped"


def finish_record(item: pytest.Item, record: ItemRecord) -> None:
    """End time, labels from ``pytest_topsail_labels``, and ``exit_code``/``settings.yaml`` in the item directory."""
    record.end = time.time()
    for labels in item.config.hook.pytest_topsail_labels(item=item):
        if labels:
            record.labels.update(redact(labels))
    if record.directory is not None:
        write_item_files(record.directory, record)


def write_item_files(directory: Path, record: ItemRecord) -> None:
    from pytest_topsail.artifacts import write_text_atomic
    from pytest_topsail.config import dump_yaml

    write_text_atomic(directory / SETTINGS_FILE, dump_yaml(record.settings))
    write_text_atomic(directory / EXIT_CODE_FILE, "1\n" if record.outcome == "failed" else "0\n")
    if record.outcome == "skipped":
        write_text_atomic(directory / SKIP_FILE, "skipped\n")
