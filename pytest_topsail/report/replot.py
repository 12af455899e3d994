"""``--topsail-replot DIR``: rebuild item records from saved artifacts, without a cluster.

An item directory holds ``item.json`` (the full record, written by the reporting plugin: ``ItemRecord.from_dict``
reads every version, a record saved before the version field included), or at least ``settings.yaml`` +
``exit_code`` (+ ``kpis.json``). When the suite's ``kpis.py`` defines ``parse(artifact_dir)``,
its result goes through the suite's KPI functions again (its ``kpi_scopes`` attribute, if any, {scope: labels},
names the worker or run of its scoped KPIs). Missing or broken files are reported, never fatal.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from pytest_topsail.items import CaseRecord, ItemRecord, is_kpi
from pytest_topsail.kpi import KpiRecorder, SuiteKpis
from pytest_topsail.yamlparse import parse_yaml

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


def load_item(directory: Path, root: Path, problems: list[str]) -> ItemRecord | None:
    if (directory / ITEM_FILE).is_file():
        data = _read_json(directory / ITEM_FILE, problems)
        try:
            record = ItemRecord.from_dict(data) if data is not None else None
        except ValueError as error:
            problems.append(f"{directory / ITEM_FILE}: not an item record ({error})")
            record = None
        if record is not None:
            record.artifact_dir = str(directory)
            return record
        if not (directory / "settings.yaml").is_file():
            return None
    relative = directory.relative_to(root).parts
    suite = relative[0] if len(relative) >= 2 else root.name
    try:
        settings = parse_yaml((directory / "settings.yaml").read_text(encoding="utf-8")) or {}
        exit_code = int((directory / "exit_code").read_text().strip() or 1)
    except (OSError, ValueError, yaml.YAMLError) as error:
        problems.append(f"{directory}: settings.yaml/exit_code unreadable ({type(error).__name__})")
        return None
    kpis = _read_json(directory / KPIS_FILE, problems) or []
    if not isinstance(kpis, list) or not all(is_kpi(kpi) for kpi in kpis):
        problems.append(f"{directory / KPIS_FILE}: not a list of KPI records; ignored")
        kpis = []
    name = directory.name.split("__", 1)[-1]
    stat = directory.stat()
    return ItemRecord(
        suite=suite, nodeid=f"{suite}::{name}", test_id=name, artifact_dir=str(directory),
        case=CaseRecord(name=name, id=name, settings=settings if isinstance(settings, dict) else {}),
        outcome="passed" if exit_code == 0 else "failed", start=stat.st_mtime, end=stat.st_mtime, kpis=kpis)


def reparse(record: ItemRecord, suite_kpis: SuiteKpis, parse: Callable[[Path], Any], problems: list[str]) -> None:
    """Run the suite's parser and KPI functions again; keeps the item's uuid and timestamps."""
    directory = Path(record.artifact_dir or ".")
    old = {k["name"]: k for k in record.kpis}
    test_uuid = next(iter(old.values()))["test_uuid"] if old else None
    try:
        data = parse(directory)
        recorder = KpiRecorder(dataclasses.replace(record, kpis=[]), suite_kpis, test_uuid=test_uuid)
        for scope, labels in (getattr(data, "kpi_scopes", None) or {}).items():  # run/worker-scoped KPIs' labels
            recorder.scope(scope, **labels)
        recorder.record_from(data)
    except Exception as error:  # a parser failure is reported; the saved kpis.json stays in use
        problems.append(f"{directory}: parse failed ({type(error).__name__}: {error}); kept saved KPIs")
        return
    timestamp = min((k["timestamp"] for k in old.values()), default=record.end or record.start)
    for entry in recorder.item_record.kpis:
        entry["timestamp"] = old.get(entry["name"], {}).get("timestamp", timestamp)
        if record.machine_load is not None:  # the contention measured when it ran
            entry["machine_load"] = record.machine_load
    record.kpis = recorder.item_record.kpis


def check_saved_run_files(root: Path, problems: list[str]) -> None:
    """The run's own saved files a replot does not rebuild from (its verdicts.json, each suite's config.yaml): a
    garbled one is a problem line, never silently ignored (the replot writes verdicts.json anew)."""
    if (root / "verdicts.json").is_file():
        verdicts = _read_json(root / "verdicts.json", problems)
        if verdicts is not None and not isinstance(verdicts, list):
            problems.append(f"{root / 'verdicts.json'}: not a list of verdicts")
    for config in sorted(root.glob("*/config.yaml")):
        try:
            parse_yaml(config.read_text(encoding="utf-8"))
        except (OSError, ValueError, yaml.YAMLError) as error:
            problems.append(f"{config}: unreadable saved configuration ({type(error).__name__}); "
                            "the suite's current config.yaml is used")


def load_items(root: Path, problems: list[str]) -> list[ItemRecord]:
    check_saved_run_files(root, problems)
    items = []
    for directory in find_item_dirs(root):
        record = load_item(directory, root, problems)
        if record is not None:
            items.append(record)
    if not items:
        problems.append(f"{root}: no saved test item found (directories with item.json or settings.yaml + exit_code)")
    return items
