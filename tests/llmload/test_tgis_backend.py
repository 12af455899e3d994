"""The TGIS gRPC backend: one channel for the whole load test, streamed token counts, gRPC codes as failures."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from pytest_topsail.llmload.backends.tgis_grpc import TgisBackend
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.generator import LoadPoint
from pytest_topsail.llmload.run import run_load_test
from tests.llmload.conftest import client_stall_s

PROMPTS = [Prompt("one two three", 3, 5), Prompt("four five", 2, 8)]


def test_streams_over_one_connection(fake_tgis, tmp_path: Path) -> None:
    fake_tgis.itl_s = 0.005
    summary = run_load_test(TgisBackend(fake_tgis.target, model="toy"), PROMPTS,
                            [LoadPoint(concurrency=8, requests=40)], tmp_path)[0]
    assert summary["succeeded"] == 40 and fake_tgis.calls == 40
    assert len(fake_tgis.peers) == 1  # every stream multiplexed over one HTTP/2 connection
    assert summary["stats"]["output_tokens"]["min"] == 5 and summary["stats"]["input_tokens"]["max"] == 3
    # the server's 5 ms sleeps; the < 1000 bound catches a unit mistake, not the machine's load
    assert 5 <= summary["stats"]["itl_ms"]["median"] < 1000
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert all(sum(n for _, n in r["chunks"]) == r["output_tokens"] for r in records)


def test_unary_generate(fake_tgis, tmp_path: Path) -> None:
    summary = run_load_test(TgisBackend(fake_tgis.target, stream=False), PROMPTS,
                            [LoadPoint(concurrency=2, requests=4)], tmp_path)[0]
    assert summary["succeeded"] == 4 and summary["stats"]["ttft_ms"] is None
    assert summary["stats"]["output_tokens"]["max"] == 8


def test_grpc_errors_are_counted_by_code(fake_tgis, tmp_path: Path) -> None:
    prompts = [Prompt("FAIL", 1, 2)]
    summary = run_load_test(TgisBackend(fake_tgis.target), prompts, [LoadPoint(concurrency=1, requests=2)],
                            tmp_path)[0]
    assert summary["failures"] == {"INVALID_ARGUMENT": 2}
    summary = run_load_test(TgisBackend("127.0.0.1:9"), prompts, [LoadPoint(concurrency=1, requests=1,
                                                                             timeout_s=5)], tmp_path / "b")[0]
    assert summary["failures"] == {"UNAVAILABLE": 1}


def test_a_stream_past_its_timeout_is_cancelled_and_its_reader_ends(fake_tgis, tmp_path: Path) -> None:
    fake_tgis.itl_s = 0.2  # 500 tokens would take 100 s
    began = time.monotonic()
    summary = run_load_test(TgisBackend(fake_tgis.target), [Prompt("slow", 1, 500)],
                            [LoadPoint(concurrency=2, requests=2, timeout_s=0.5)], tmp_path)[0]
    assert time.monotonic() - began < 30  # ended by the 0.5 s timeout (a loaded machine adds seconds), not the stream
    assert summary["failures"] == {"timeout": 2}
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert all(1 <= len(r["chunks"]) <= 3 and r["chunks"][-1][0] <= r["end"] for r in records)
    assert not [thread for thread in threading.enumerate() if thread.name == "tgis-stream"]


def test_stream_times_are_taken_per_message(fake_tgis, tmp_path: Path) -> None:
    fake_tgis.itl_s = 0.1  # long beside a loaded machine's scheduling delays
    [summary] = run_load_test(TgisBackend(fake_tgis.target), [Prompt("one", 1, 5)],
                              [LoadPoint(concurrency=1, requests=2)], tmp_path)
    stalled_s = client_stall_s(summary)
    for record in (json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()):
        times = [record["start"], *(when for when, _ in record["chunks"]), record["end"]]
        assert times == sorted(times) and len(record["chunks"]) == 5
        gaps = [b - a for a, b in zip(times[1:-2], times[2:-1], strict=True)]
        # stamped as each message arrived, not when the stream ended: less what the client says its own event loop
        # stalled (a message read late makes the next gap that much shorter); no upper bound: load stretches
        assert all(gap >= 0.08 - stalled_s for gap in gaps), (gaps, stalled_s)


def test_streams_still_running_after_the_drain_are_cancelled(fake_tgis, tmp_path: Path) -> None:
    fake_tgis.itl_s = 0.2  # 500 tokens would take 100 s
    began = time.monotonic()
    summary = run_load_test(TgisBackend(fake_tgis.target), [Prompt("slow", 1, 500)],
                            [LoadPoint(concurrency=3, duration_s=0.3, drain_timeout_s=0.2)], tmp_path)[0]
    assert time.monotonic() - began < 30  # ended by the drain timeout (a loaded machine adds seconds), not the streams
    assert summary["failures"] == {"cancelled": 3}
    assert not [thread for thread in threading.enumerate() if thread.name == "tgis-stream"]
