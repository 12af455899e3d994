"""The per-item record: created when a suite item starts, attached to its teardown report as ``report.topsail``.

The record is plain JSON-serializable data so that it crosses the xdist boundary with the report. Schema in
docs/architecture.md. Other plugins append to ``kpis``, ``figures`` and ``labels`` during the test.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.cases import Case
from pytest_topsail.redact import redact

ITEM_RECORD_KEY = pytest.StashKey[dict[str, Any]]()
ITEM_DIR_KEY = pytest.StashKey[Path]()
SETTINGS_FILE = "settings.yaml"
EXIT_CODE_FILE = "exit_code"
SKIP_FILE = "skip"


def case_of_item(item: pytest.Item) -> Case | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    case = callspec.params.get("case")
    return case if isinstance(case, Case) else None


def new_record(item: pytest.Item, suite: str, artifact_dir: Path | None) -> dict[str, Any]:
    case = case_of_item(item)
    return {
        "suite": suite,
        "nodeid": item.nodeid,
        "test_id": item.name,
        "artifact_dir": str(artifact_dir) if artifact_dir is not None else None,
        "case": {"name": case.name, "id": case.id, "settings": redact(_json_safe(case.settings))} if case else None,
        "outcome": "passed",
        "start": time.time(),
        "end": None,
        "kpis": [],
        "figures": [],
        "labels": {},
    }


def _json_safe(value: Any) -> Any:
    """YAML can hold dates and other non-JSON values; the record must cross the xdist boundary as JSON-like data."""
    return json.loads(json.dumps(value, default=str))


def record_phase(record: dict[str, Any], report: pytest.TestReport) -> None:
    """Fold one phase's report into the record's outcome: failed wins over skipped wins over passed."""
    if report.failed:
        record["outcome"] = "failed"
    elif report.skipped and record["outcome"] == "passed":
        record["outcome"] = "skipped"


def finish_record(item: pytest.Item, record: dict[str, Any]) -> None:
    """End time, labels from ``pytest_topsail_labels``, and ``exit_code``/``settings.yaml`` in the item directory."""
    record["end"] = time.time()
    for labels in item.config.hook.pytest_topsail_labels(item=item):
        if labels:
            record["labels"].update(redact(labels))
    if record["artifact_dir"]:
        write_item_files(Path(record["artifact_dir"]), record)


def write_item_files(directory: Path, record: dict[str, Any]) -> None:
    from pytest_topsail.artifacts import write_text_atomic
    from pytest_topsail.config import dump_yaml

    case = record["case"]
    write_text_atomic(directory / SETTINGS_FILE, dump_yaml(case["settings"] if case else {}))
    write_text_atomic(directory / EXIT_CODE_FILE, "1\n" if record["outcome"] == "failed" else "0\n")
    if record["outcome"] == "skipped":
        write_text_atomic(directory / SKIP_FILE, "skipped\n")
