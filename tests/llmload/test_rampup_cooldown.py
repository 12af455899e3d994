"""Ramp-up (warm-up) and cool-down, in seconds or request counts: their requests run and are kept in the records,
marked, and left out of every metric; the measurement window lies between them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.llmload.backends.openai_http import OpenAIBackend
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.generator import LoadPoint
from pytest_topsail.llmload.run import analyse_directory, run_load_test
from pytest_topsail.llmload.settings import case_load_settings

PROMPTS = [Prompt("one two three", 3, 4)]


def run(url: str, point: LoadPoint, directory: Path) -> tuple[dict, list[dict], dict]:
    summary = run_load_test(OpenAIBackend(url=url, model="toy"), PROMPTS, [point], directory)[0]
    records = [json.loads(line) for line in (directory / "records.jsonl").read_text().splitlines()]
    [document] = json.loads((directory / "points.json").read_text())
    return summary, records, document


def test_cooldown_seconds_keep_the_load_on_after_the_window(fake_server, tmp_path: Path) -> None:
    fake_server.itl_s = 0.01  # 40 ms a request
    point = LoadPoint(concurrency=2, warmup_s=0.2, duration_s=0.4, cooldown_s=0.3, drain_timeout_s=5)
    summary, records, document = run(fake_server.url, point, tmp_path)
    warm = [r for r in records if r["warmup"]]
    cool = [r for r in records if r["cooldown"]]
    measured = [r for r in records if not r["warmup"] and not r["cooldown"]]
    assert warm and cool and measured and all(r["status"] == "ok" for r in records)
    assert all(r["start"] < 0.2 for r in warm) and all(0.2 <= r["start"] < 0.6 for r in measured)
    assert all(0.6 <= r["start"] < 0.9 for r in cool)  # issued through the cool-down, after the window
    assert document["measure_end"] == pytest.approx(0.6, abs=0.02) and document["stop"] >= 0.88
    assert summary["window_s"] == pytest.approx(0.4, abs=0.02)
    assert summary["requests"] == len(measured) and summary["cooldown_requests"] == len(cool)
    ended_inside = sum(1 for r in records if 0.2 <= r["end"] <= document["measure_end"])
    assert summary["requests_per_s"] == pytest.approx(ended_inside / summary["window_s"])
    assert len(fake_server.requests) == len(records)  # the cool-down requests were really sent


def test_rampup_and_cooldown_by_request_count(fake_server, tmp_path: Path) -> None:
    point = LoadPoint(concurrency=1, warmup_requests=3, requests=5, cooldown_requests=2)
    summary, records, document = run(fake_server.url, point, tmp_path)
    assert [(r["warmup"], r["cooldown"]) for r in records] == [(True, False)] * 3 + [(False, False)] * 5 + [
        (False, True)] * 2
    assert summary["requests"] == summary["succeeded"] == 5
    assert summary["warmup_requests"] == 3 and summary["cooldown_requests"] == 2
    fourth, ninth = records[3], records[8]
    assert document["measure_start"] == pytest.approx(fourth["start"], abs=0.005)  # the ramp-up's end
    assert document["measure_end"] == pytest.approx(ninth["start"], abs=0.005)  # the cool-down's start
    (tmp_path / "summary.json").unlink()
    assert analyse_directory(tmp_path)[0] == summary  # a replot reads the same marks


def test_open_loop_rampup_by_count_moves_the_window(fake_server, tmp_path: Path) -> None:
    point = LoadPoint(mode="constant", rate=50.0, warmup_requests=5, duration_s=0.21, cooldown_requests=3)
    summary, records, document = run(fake_server.url, point, tmp_path)
    assert sum(r["warmup"] for r in records) == 5 and sum(r["cooldown"] for r in records) == 3
    assert document["measure_start"] == pytest.approx(0.1, abs=0.01)  # the 6th request was due at 100 ms
    assert summary["requests"] == 11 and summary["window_s"] == pytest.approx(0.21, abs=0.02)  # due 0.10 .. 0.30 s


@pytest.mark.parametrize(("key", "value"), [("cooldown_s", -1), ("warmup_requests", -2), ("cooldown_requests", 1.5)])
def test_bad_rampup_or_cooldown_is_named(key: str, value: object) -> None:
    with pytest.raises(TopsailError, match=f"case x: invalid load settings: key {key}"):
        case_load_settings({"model": "m", "concurrency": 1, "duration_s": 1, key: value}, "case x", {})
