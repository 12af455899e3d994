"""``--topsail-replot DIR``: rebuild item records from saved artifacts, without a cluster.

An item directory holds ``item.json`` (the full record, written by the reporting plugin), or at least
``settings.yaml`` + ``exit_code`` (+ ``kpis.json``). When the suite's ``kpis.py`` defines ``parse(artifact_dir)``,
its result goes through the suite's KPI functions again. Missing or broken files are reported, never fatal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from pytest_topsail.kpi import KpiRecorder, SuiteKpis

ITEM_FILE = "item.json"
KPIS_FILE = "kpis.json"


def find_item_dirs(root: Path) -> list[Path]:
    found = []
    for directory, _, files in os.walk(root):
        if ITEM_FILE in files or ("settings.yaml" in files and "exit_code" in files):
            if "skip" not in files:
                found.append(Path(directory))
    return sorted(found)


def _read_json(path: Path, problems: list[str]) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problems.append(f"{path}: missing")
    except (OSError, ValueError) as error:  # ValueError: not JSON, or not UTF-8 text (a binary file)
        problems.append(f"{path}: unreadable ({type(error).__name__}: {error})")
    return None


def _is_record(record: Any) -> bool:
    """The shape the report relies on: suite and nodeid strings, KPIs a list of mappings with a name and a value."""
    if not isinstance(record, dict) or not isinstance(record.get("nodeid"), str):
        return False
    if not isinstance(record.get("suite"), str):
        return False
    kpis = record.get("kpis") or []
    return isinstance(kpis, list) and all(_is_kpi(kpi) for kpi in kpis)


def _is_kpi(kpi: Any) -> bool:
    return (isinstance(kpi, dict) and isinstance(kpi.get("name"), str) and isinstance(kpi.get("value"), int | float)
            and not isinstance(kpi.get("value"), bool))


def load_item(directory: Path, root: Path, problems: list[str]) -> dict[str, Any] | None:
    if (directory / ITEM_FILE).is_file():
        record = _read_json(directory / ITEM_FILE, problems)
        if _is_record(record):
            record["artifact_dir"] = str(directory)
            return record
        if record is not None:
            problems.append(f"{directory / ITEM_FILE}: not an item record (suite, nodeid, kpis expected)")
        if not (directory / "settings.yaml").is_file():
            return None
    relative = directory.relative_to(root).parts
    suite = relative[0] if len(relative) >= 2 else root.name
    try:
        settings = yaml.safe_load((directory / "settings.yaml").read_text(encoding="utf-8")) or {}
        exit_code = int((directory / "exit_code").read_text().strip() or 1)
    except (OSError, ValueError, yaml.YAMLError) as error:
        problems.append(f"{directory}: settings.yaml/exit_code unreadable ({type(error).__name__})")
        return None
    kpis = _read_json(directory / KPIS_FILE, problems) or []
    if not isinstance(kpis, list) or not all(_is_kpi(kpi) for kpi in kpis):
        problems.append(f"{directory / KPIS_FILE}: not a list of KPI records; ignored")
        kpis = []
    name = directory.name.split("__", 1)[-1]
    stat = directory.stat()
    return {
        "suite": suite, "nodeid": f"{suite}::{name}", "test_id": name, "artifact_dir": str(directory),
        "case": {"name": name, "id": name, "settings": settings if isinstance(settings, dict) else {}},
        "outcome": "passed" if exit_code == 0 else "failed", "start": stat.st_mtime, "end": stat.st_mtime,
        "kpis": kpis, "figures": [], "labels": {},
    }


def reparse(record: dict[str, Any], suite_kpis: SuiteKpis, parse: Callable[[Path], Any], problems: list[str]) -> None:
    """Run the suite's parser and KPI functions again; keeps the item's uuid and timestamps."""
    directory = Path(record["artifact_dir"])
    old = {k["name"]: k for k in record.get("kpis") or []}
    test_uuid = next(iter(old.values()))["test_uuid"] if old else None
    try:
        data = parse(directory)
        recorder = KpiRecorder({**record, "kpis": [], "figures": record.get("figures") or []}, suite_kpis,
                               test_uuid=test_uuid)
        recorder.record_from(data)
    except Exception as error:  # a parser failure is reported; the saved kpis.json stays in use
        problems.append(f"{directory}: parse failed ({type(error).__name__}: {error}); kept saved KPIs")
        return
    timestamp = min((k["timestamp"] for k in old.values()), default=record.get("end") or record.get("start"))
    for entry in recorder.item_record["kpis"]:
        entry["timestamp"] = old.get(entry["name"], {}).get("timestamp", timestamp)
        if record.get("machine_load") is not None:  # the contention measured when it ran
            entry["machine_load"] = record["machine_load"]
    record["kpis"] = recorder.item_record["kpis"]


def check_saved_run_files(root: Path, problems: list[str]) -> None:
    """The run's own saved files a replot does not rebuild from (its verdicts.json, each suite's config.yaml): a
    garbled one is a problem line, never silently ignored (the replot writes verdicts.json anew)."""
    if (root / "verdicts.json").is_file():
        verdicts = _read_json(root / "verdicts.json", problems)
        if verdicts is not None and not isinstance(verdicts, list):
            problems.append(f"{root / 'verdicts.json'}: not a list of verdicts")
    for config in sorted(root.glob("*/config.yaml")):
        try:
            yaml.safe_load(config.read_text(encoding="utf-8"))
        except (OSError, ValueError, yaml.YAMLError) as error:
            problems.append(f"{config}: unreadable saved configuration ({type(error).__name__}); "
                            "the suite's current config.yaml is used")


def load_items(root: Path, problems: list[str]) -> list[dict[str, Any]]:
    check_saved_run_files(root, problems)
    items = []
    for directory in find_item_dirs(root):
        record = load_item(directory, root, problems)
        if record is not None:
            items.append(record)
    if not items:
        problems.append(f"{root}: no saved test item found (directories with item.json or settings.yaml + exit_code)")
    return items
