"""Benchmark of the KPI history store (not part of the test run).

    python benchmarks/report_history.py [--records 10000] [--repeat 5]

Stores N KPI records (as the reporting plugin does at session end) into a fresh SQLite history file
(goal: 10,000 records <= 2 s), and reads them back. Printed beside a baseline measured side by side in the same
run: the same rows inserted with bare ``sqlite3`` (default journal, no JSON serialisation, no checks).
Medians of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from pytest_topsail.history.sqlite import SqliteHistory

GOAL_SECONDS = 2.0


def make_records(count: int) -> list[dict]:
    records = []
    for index in range(count):
        test_uuid = str(uuid.UUID(int=index // 10))
        records.append({
            "name": f"kpi_{index % 10}", "value": float(index), "unit": "tokens/s", "help": "throughput",
            "higher_better": True, "ignored_for_regression": False, "format": "{:.1f}", "suite": "fine_tuning",
            "timestamp": 1.7e9 + index, "test_uuid": test_uuid, "nodeid": f"suites/ft/test_ft.py::t[{index // 10}]",
            "test_id": f"t[{index // 10}]", "labels": {"model_name": "llama-3-8b", "accelerator_count": 8,
                                                        "container_image": "quay.io/x:1", "batch_size": index % 7}})
    return records


def store_once(directory: Path, records: list[dict]) -> tuple[float, float]:
    store = SqliteHistory(directory / "history.sqlite")
    start = time.perf_counter()
    store.add(records)
    stored = time.perf_counter() - start
    start = time.perf_counter()
    assert len(store.records("fine_tuning")) == len(records)
    read = time.perf_counter() - start
    store.close()
    return stored, read


def baseline_once(directory: Path, records: list[dict]) -> float:
    connection = sqlite3.connect(str(directory / "bare.sqlite"))
    connection.execute("CREATE TABLE kpis (test_uuid TEXT, name TEXT, value REAL)")
    start = time.perf_counter()
    connection.executemany("INSERT INTO kpis VALUES (?, ?, ?)",
                           [(r["test_uuid"], r["name"], r["value"]) for r in records])
    connection.commit()
    seconds = time.perf_counter() - start
    connection.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    records = make_records(args.records)
    stored, read, bare = [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="topsail-bench-") as directory:
            seconds, reading = store_once(Path(directory), records)
            stored.append(seconds)
            read.append(reading)
            bare.append(baseline_once(Path(directory), records))
    median, base = statistics.median(stored), statistics.median(bare)
    print(f"{args.records} KPI records stored in SQLite history (WAL): median {median:.3f} s "
          f"(goal <= {GOAL_SECONDS} s: {'OK' if median <= GOAL_SECONDS else 'MISSED'}); "
          f"read back: median {statistics.median(read):.3f} s")
    print(f"baseline, bare sqlite3 insert of (uuid, name, value): median {base:.3f} s; ratio {median / base:.1f}x")


if __name__ == "__main__":
    main()
