"""History records and the store protocol: what every backend (``sqlite``, ``opensearch``) stores and returns, the
check of a record's required fields, and the JSON-lines export/import of a store."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol, TextIO

from pytest_topsail.errors import TopsailError
from pytest_topsail.jsonl import read_json_lines

REQUIRED_FIELDS = ("name", "value", "suite", "timestamp", "test_uuid")


class HistoryStore(Protocol):
    def add(self, records: Iterable[dict[str, Any]]) -> int:
        """Store records (same test_uuid and name replace the previous one); returns how many."""

    def records(self, suite: str | None = None) -> list[dict[str, Any]]:
        """All records (of one suite), oldest first."""

    def close(self) -> None: ...


def check_record(record: dict[str, Any], where: str) -> dict[str, Any]:
    missing = [f for f in REQUIRED_FIELDS if f not in record]
    if missing:
        raise TopsailError(f"{where}: KPI record misses {', '.join(missing)}")
    return record


def export_jsonl(store: HistoryStore, out: TextIO, suite: str | None = None) -> int:
    count = 0
    for record in store.records(suite):
        out.write(json.dumps(record, sort_keys=True) + "\n")
        count += 1
    return count


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    for number, record in read_json_lines(path):
        if not isinstance(record, dict):
            raise TopsailError(f"{path}:{number}: a KPI record must be a JSON object")
        yield check_record(record, f"{path}:{number}")


def import_jsonl(store: HistoryStore, path: Path) -> int:
    return store.add(read_jsonl(path))
