"""KPI history: a history record is a KPI record as produced by :mod:`pytest_topsail.kpi` (name, value, unit,
labels, timestamp, test_uuid, suite, ...), which the backends (``sqlite``: default, embedded; ``opensearch``) store
and return unchanged behind one protocol, ``HistoryStore`` (``add``, ``records``, ``close``), opened by
``open_history(location, opensearch_settings)``; ``records`` holds the protocol, the record check and the JSON-lines
export/import (to seed or migrate), ``importer`` the import of LTS documents (MatrixBenchmarking's, TOPSAIL's, ours:
``pytest_topsail.lts``) with their settings mapped to our labels, ``acks`` the acknowledged regressions,
``__main__`` the command line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_topsail.history.records import HistoryStore, check_record, export_jsonl, import_jsonl, read_jsonl

__all__ = ["HistoryStore", "check_record", "export_jsonl", "import_jsonl", "open_history", "read_jsonl"]


def open_history(location: str | Path, opensearch: dict[str, Any] | None = None) -> HistoryStore:
    """``location``: a SQLite file path, or ``opensearch`` (settings from ``opensearch``: url, index, ...)."""
    if str(location) == "opensearch":
        from pytest_topsail.history.opensearch import OpenSearchHistory

        return OpenSearchHistory.from_settings(opensearch or {})
    from pytest_topsail.history.sqlite import SqliteHistory

    return SqliteHistory(Path(location))
