"""A load test's artifacts and analysis: ``points.json`` and ``records.jsonl`` are written as each point ends;
``summary.json``, ``summary.txt`` and ``records.csv`` (one row per request, for a spreadsheet or pandas) are computed
from those two files only (``analyse_directory``: the replot).
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pytest_topsail.aio import run_coroutine
from pytest_topsail.errors import TopsailError
from pytest_topsail.llmload.backends import Backend
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.generator import LoadPoint, NextPoint, PointResult, run_sweep
from pytest_topsail.llmload.metrics import format_table, request_latencies, summarize_point, sweep_table
from pytest_topsail.llmload.records import read_records, write_records

POINTS = "points.json"
RECORDS = "records.jsonl"
SUMMARY = "summary.json"
CSV = "records.csv"
CSV_COLUMNS = ("point", "index", "generator", "user", "turn", "status", "warmup", "cooldown", "scheduled", "start",
               "ack", "first_token", "end", "tt_ack_ms", "ttft_ms", "tpot_ms", "e2e_ms", "input_tokens",
               "output_tokens", "cached_tokens", "chunks", "error")


def point_document(result: PointResult) -> dict[str, Any]:
    return {"index": result.index, "label": result.point.label, "point": asdict(result.point),
            "started_epoch": result.started_epoch, "measure_start": result.measure_start, "stop": result.stop,
            "ended": result.ended, "stopped_by": result.stopped_by,
            "measure_end": result.stop if result.measure_end is None else result.measure_end,
            "client": result.client}


def run_load_test(backend: Backend, prompts: Sequence[Prompt], points: Sequence[LoadPoint] | NextPoint,
                  directory: Path,
                  on_point: Callable[[PointResult], None] | None = None,
                  slo: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Run the sweep, saving each point's records as it ends; returns the summaries (also in summary.json).
    ``slo``: the SLO targets saved with each point (ttft_ms, itl_ms, e2e_ms), judged by the summaries."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / RECORDS).unlink(missing_ok=True)
    documents: list[dict[str, Any]] = []

    def save(result: PointResult) -> None:
        write_records(result.records, directory / RECORDS)
        documents.append({**point_document(result), "slo": slo or {}})
        (directory / POINTS).write_text(json.dumps(documents, indent=1), encoding="utf-8")
        if on_point is not None:
            on_point(result)

    run_coroutine(run_sweep(backend, prompts, points, on_point=save))
    return analyse_directory(directory)


def load_directory(directory: Path) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
    """The points (points.json) and their records (records.jsonl) of a load test's artifact directory."""
    points_path = directory / POINTS
    if not points_path.is_file():
        raise TopsailError(f"{directory}: no {POINTS} (not a load test's artifact directory)")
    try:
        points = json.loads(points_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise TopsailError(f"{points_path}: not JSON: {error.msg}") from None
    by_point: dict[int, list[dict[str, Any]]] = defaultdict(list)
    records_path = directory / RECORDS
    if records_path.is_file():
        for record in read_records(records_path):
            by_point[record["point"]].append(record)
    return points, by_point


def analyse_directory(directory: Path) -> list[dict[str, Any]]:
    """Summaries of every point from points.json and records.jsonl; writes summary.json and summary.txt."""
    points, by_point = load_directory(directory)
    summaries = [summarize_point(point, by_point.get(point["index"], [])) for point in points]
    (directory / SUMMARY).write_text(json.dumps(summaries, indent=1), encoding="utf-8")
    (directory / "summary.txt").write_text(format_table(sweep_table(summaries)), encoding="utf-8")
    write_csv(directory / CSV, [record for point in points for record in by_point.get(point["index"], [])])
    return summaries


def write_csv(path: Path, records: list[dict[str, Any]]) -> None:
    """One row per request: its times (s since the point's start), its latencies (ms) and token counts."""
    with path.open("w", encoding="utf-8", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for record in records:
            latencies = request_latencies(record)
            row = {**record, "chunks": len(record.get("chunks") or ())}
            for name in ("tt_ack", "ttft", "tpot", "e2e"):
                row[f"{name}_ms"] = None if latencies[name] is None else round(latencies[name] * 1000.0, 3)
            writer.writerow(row)


def merge_directories(directories: Sequence[Path]) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
    """The points and records of several load tests (e.g. one per item of a sweep) as one sweep, renumbered."""
    points: list[dict[str, Any]] = []
    by_point: dict[int, list[dict[str, Any]]] = {}
    for directory in directories:
        own_points, own_records = load_directory(directory)
        for point in own_points:
            index = len(points)
            points.append({**point, "index": index})
            by_point[index] = [{**record, "point": index} for record in own_records.get(point["index"], [])]
    return points, by_point
