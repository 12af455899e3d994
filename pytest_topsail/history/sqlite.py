"""Embedded KPI history in one SQLite file (WAL journal: concurrent readers and writers are safe)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.history.records import check_record

SCHEMA = """
CREATE TABLE IF NOT EXISTS kpis (
    test_uuid TEXT NOT NULL,
    name TEXT NOT NULL,
    suite TEXT NOT NULL,
    timestamp REAL NOT NULL,
    value REAL NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (test_uuid, name)
);
CREATE INDEX IF NOT EXISTS kpis_by_suite ON kpis (suite, name, timestamp);
"""


class SqliteHistory:
    """History file created on first use; one row per (test_uuid, KPI name)."""

    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.connection = sqlite3.connect(str(path), timeout=timeout, isolation_level=None)
            self.connection.execute("PRAGMA journal_mode=WAL")
            self.connection.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            self.connection.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as error:
            raise TopsailError(f"KPI history {path}: cannot be opened: {error}") from None

    def add(self, records: Iterable[dict[str, Any]]) -> int:
        rows = [
            (r["test_uuid"], r["name"], r["suite"], float(r["timestamp"]), float(r["value"]),
             json.dumps(r, sort_keys=True))
            for r in (check_record(r, str(self.path)) for r in records)
        ]
        try:
            self.connection.execute("BEGIN IMMEDIATE")
            self.connection.executemany("INSERT OR REPLACE INTO kpis VALUES (?, ?, ?, ?, ?, ?)", rows)
            self.connection.execute("COMMIT")
        except sqlite3.Error as error:
            if self.connection.in_transaction:
                self.connection.execute("ROLLBACK")
            raise TopsailError(f"KPI history {self.path}: cannot store records: {error}") from None
        return len(rows)

    def records(self, suite: str | None = None) -> list[dict[str, Any]]:
        if suite is None:
            cursor = self.connection.execute("SELECT record FROM kpis ORDER BY timestamp, rowid")
        else:
            cursor = self.connection.execute(
                "SELECT record FROM kpis WHERE suite = ? ORDER BY timestamp, rowid", (suite,))
        return [json.loads(row[0]) for row in cursor]

    def close(self) -> None:
        self.connection.close()
