"""The metric definitions of docs/llm-load.md, checked on hand-made records."""

from __future__ import annotations

import pytest

from pytest_topsail.llmload.metrics import request_latencies, statistics, summarize_point


def record(start: float, chunks: list[list[float]], *, status: str = "ok", warmup: bool = False,
           scheduled: float | None = None) -> dict:
    return {"point": 0, "index": 0, "start": start, "end": chunks[-1][0] if chunks else start + 1,
            "first_token": chunks[0][0] if chunks else None, "scheduled": scheduled, "warmup": warmup,
            "status": status, "input_tokens": 10, "output_tokens": sum(n for _, n in chunks), "chunks": chunks}


def test_request_latencies() -> None:
    # first token at 0.5 s, then tokens at 0.6, 0.8 and a 2-token chunk at 1.2
    values = request_latencies(record(0.0, [[0.5, 1], [0.6, 1], [0.8, 1], [1.2, 2]]))
    assert values["ttft"] == pytest.approx(0.5)
    assert values["e2e"] == pytest.approx(1.2)
    assert values["tpot"] == pytest.approx((1.2 - 0.5) / 4)  # 5 tokens: excludes the first
    assert values["itl"] == pytest.approx([0.1, 0.2, 0.2, 0.2])  # the 2-token chunk counts as two gaps of 0.2


def test_single_token_and_unstreamed_requests() -> None:
    assert request_latencies(record(0.0, [[0.3, 1]]))["tpot"] is None
    unstreamed = {**record(0.0, []), "end": 2.0, "output_tokens": 8}
    assert request_latencies(unstreamed) == {"ttft": None, "tpot": None, "e2e": 2.0, "itl": [], "tt_ack": None}


def test_statistics_quantiles() -> None:
    stats = statistics([float(v) for v in range(1, 101)])
    assert stats is not None
    assert (stats["min"], stats["max"], stats["median"], stats["mean"]) == (1, 100, 50.5, 50.5)
    assert stats["p90"] == pytest.approx(90.1) and stats["p99"] == pytest.approx(99.01)
    assert statistics([]) is None


def test_point_summary_window_rates_and_failures() -> None:
    point = {"index": 0, "label": "constant rate=2/s", "measure_start": 1.0, "stop": 3.0,
             "point": {"mode": "constant", "rate": 2.0, "concurrency": None}}
    records = [
        record(0.2, [[0.4, 1], [0.6, 1], [1.5, 1]], warmup=True),  # warm-up: 1 token inside the window
        record(1.0, [[1.2, 1], [1.4, 1], [1.6, 1]], scheduled=1.0),
        record(1.5, [[1.9, 1], [2.5, 1], [3.5, 1]], scheduled=1.4),  # last token after the stop
        record(2.0, [], status="http_429", scheduled=2.0),
        record(2.5, [], status="timeout", scheduled=2.5),
    ]
    summary = summarize_point(point, records)
    assert summary["requests"] == 4 and summary["succeeded"] == 2 and summary["warmup_requests"] == 1
    assert summary["failures"] == {"http_429": 1, "timeout": 1}
    assert summary["failure_rate"] == 0.5
    assert summary["offered_rate"] == 2.0
    assert summary["achieved_rate"] == pytest.approx(4 / 2.0)
    assert summary["output_tokens_per_s"] == pytest.approx((1 + 3 + 2) / 2.0)
    assert summary["requests_per_s"] == pytest.approx(2 / 2.0)  # ended inside: the warm-up one (1.5) and 1.6
    ttft = summary["stats"]["ttft_ms"]
    assert ttft["min"] == pytest.approx(200) and ttft["max"] == pytest.approx(400)
    assert summary["stats"]["tpot_ms"]["median"] == pytest.approx(((1.6 - 1.2) / 2 * 1000 + (3.5 - 1.9) / 2 * 1000) / 2)
    assert summary["send_lag_ms"]["max"] == pytest.approx(100)
