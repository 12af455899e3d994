"""Per-request records as CSV beside records.jsonl, and tt_ack (time to the first response message, even one
without a token) on both backends."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pytest_topsail.llmload.backends.openai_http import OpenAIBackend
from pytest_topsail.llmload.backends.tgis_grpc import TgisBackend
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.generator import LoadPoint
from pytest_topsail.llmload.records import read_records
from pytest_topsail.llmload.run import analyse_directory, run_load_test

PROMPTS = [Prompt("one two three", 3, 4), Prompt("FAIL now", 2, 4)]


def test_records_csv_has_one_row_per_request_with_its_latencies(fake_server, tmp_path: Path) -> None:
    fake_server.prefill_s, fake_server.itl_s = 0.05, 0.01
    summary = run_load_test(OpenAIBackend(fake_server.url, "toy"), PROMPTS,
                            [LoadPoint(concurrency=2, requests=6, warmup_requests=2)], tmp_path)[0]
    records = list(read_records(tmp_path / "records.jsonl"))
    with (tmp_path / "records.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == len(records) == 8 and [int(r["index"]) for r in rows] == [r["index"] for r in records]
    ok = next(row for row in rows if row["status"] == "ok" and row["warmup"] == "False")
    record = next(r for r in records if r["index"] == int(ok["index"]))
    # the record's own latency in ms (no upper bound in wall time: a loaded machine stretches the server's sleeps)
    assert float(ok["ttft_ms"]) == pytest.approx((record["first_token"] - record["start"]) * 1000, abs=0.001)
    assert float(ok["ttft_ms"]) >= 50 and float(ok["e2e_ms"]) >= float(ok["ttft_ms"])  # the server's 50 ms prefill
    assert ok["output_tokens"] == "4" and ok["chunks"] == "4"
    failed = next(row for row in rows if row["status"] == "http_400")
    assert failed["error"] == "bad prompt" and failed["ttft_ms"] == ""
    assert summary["failures"] == {"http_400": 3}
    (tmp_path / "records.csv").unlink()
    analyse_directory(tmp_path)  # the replot writes it again
    assert (tmp_path / "records.csv").is_file()


@pytest.mark.parametrize("stream", [True, False])
def test_tt_ack_over_http_is_the_response_headers(fake_server, tmp_path: Path, stream: bool) -> None:
    """The loopback server sends its headers after the prefill (50 ms), then the answer: tt_ack is at the
    headers, no later than the first token (streamed) or the end (unstreamed)."""
    fake_server.prefill_s, fake_server.itl_s = 0.05, 0.02
    summary = run_load_test(OpenAIBackend(fake_server.url, "toy", api="chat", stream=stream), PROMPTS[:1],
                            [LoadPoint(concurrency=1, requests=3)], tmp_path)[0]
    assert summary["stats"]["tt_ack_ms"]["min"] >= 45
    for record in read_records(tmp_path / "records.jsonl"):
        assert record["start"] < record["ack"] <= (record["first_token"] if stream else record["end"])


def test_tt_ack_of_a_grpc_stream_is_its_first_message(fake_tgis, tmp_path: Path) -> None:
    """TGIS sends the input token count first, without a token: tt_ack counts it, TTFT waits for a token."""
    fake_tgis.itl_s = 0.03
    summary = run_load_test(TgisBackend(fake_tgis.target), PROMPTS[:1], [LoadPoint(concurrency=1, requests=3)],
                            tmp_path)[0]
    assert summary["stats"]["tt_ack_ms"]["median"] < summary["stats"]["ttft_ms"]["median"]
    for record in read_records(tmp_path / "records.jsonl"):  # the first token: one inter-token delay later
        assert record["ack"] + 0.02 < record["first_token"]
