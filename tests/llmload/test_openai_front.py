"""The reference server's OpenAI-compatible HTTP front, driven by the load generator and by plain HTTP calls."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.llmload.backends.openai_http import OpenAIBackend
from pytest_topsail.llmload.dataset import Prompt, synthetic
from pytest_topsail.llmload.generator import LoadPoint
from pytest_topsail.llmload.run import run_load_test
from pytest_topsail.tgis.latency import LatencyModel
from pytest_topsail.tgis.model_config import ModelConfig
from pytest_topsail.tgis.serving import ModelServer
from tests.llmload.conftest import client_stall_s

MODEL = "granite-3b"


@pytest.fixture
def zero_latency(serve_front: Any) -> str:
    return serve_front(ModelServer(MODEL, zero_latency=True))


def post(url: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_completion_whole_and_streamed_agree(zero_latency: str) -> None:
    status, text = post(zero_latency, "/v1/completions", {"model": MODEL, "prompt": "Hello there", "max_tokens": 12,
                                                          "min_tokens": 12, "temperature": 0})
    whole = json.loads(text)
    assert status == 200 and whole["object"] == "text_completion"
    assert whole["usage"] == {"prompt_tokens": 2, "completion_tokens": 12, "total_tokens": 14}
    assert whole["choices"][0]["finish_reason"] == "length"
    status, text = post(zero_latency, "/v1/completions", {
        "model": MODEL, "prompt": "Hello there", "max_tokens": 12, "min_tokens": 12, "temperature": 0,
        "stream": True, "stream_options": {"include_usage": True}})
    events = [line[6:] for line in text.split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == whole["choices"][0]["text"]
    assert chunks[-1]["usage"]["completion_tokens"] == 12 and chunks[-2]["choices"][0]["finish_reason"] == "length"


def test_chat_stream_starts_with_the_role(zero_latency: str) -> None:
    status, text = post(zero_latency, "/v1/chat/completions", {
        "model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True})
    chunks = [json.loads(line[6:]) for line in text.split("\n\n") if line.startswith("data: {")]
    assert status == 200 and chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1]["choices"][0]["finish_reason"] in ("length", "stop")


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"model": "other", "prompt": "x"}, 404, "The model `other` does not exist."),
    ({"model": MODEL, "prompt": "x", "temperature": -1}, 400, "temperature must be non-negative, got -1.0."),
    ({"model": MODEL, "prompt": "x", "top_p": 2}, 400, "top_p must be in (0, 1], got 2.0."),
    ({"model": MODEL, "prompt": "x", "max_tokens": 0}, 400, "max_tokens must be at least 1, got 0."),
    ({"model": MODEL}, 400, "prompt must be a string (one prompt per request)"),
    ({"model": MODEL, "prompt": "word " * 3000}, 400, "must be <"),
])
def test_errors_like_vllm(zero_latency: str, body: dict[str, Any], status: int, message: str) -> None:
    code, answer = post(zero_latency, "/v1/completions", body)
    assert code == status and answer["object"] == "error" and answer["code"] == status
    assert message in answer["message"]


def test_overloaded_server_answers_503(serve_front: Any, tmp_path: Path) -> None:
    config = ModelConfig(max_batch_size=1, max_concurrent_requests=2)
    server = ModelServer(MODEL, config)
    server.latency = LatencyModel(itl_base_ms=20, max_batch_size=1, max_concurrent_requests=2)
    summary = run_load_test(OpenAIBackend(serve_front(server), MODEL), [Prompt("hello", 1, 10)],
                            [LoadPoint(concurrency=4, requests=8)], tmp_path)[0]
    assert summary["failures"].get("http_503", 0) > 0 and summary["succeeded"] > 0


def test_sweep_shows_the_knee_at_max_batch_size(serve_front: Any, tmp_path: Path) -> None:
    """Below max_batch_size throughput grows and ITL grows with the batch; beyond it, requests queue: TTFT jumps
    and throughput stays flat."""
    config = ModelConfig(max_batch_size=4, max_concurrent_requests=64)
    server = ModelServer(MODEL, config)
    # tens of milliseconds, not a few: the shape must stand out of the scheduling noise of a loaded machine
    server.latency = LatencyModel(prefill_base_ms=30, itl_base_ms=30, itl_ms_per_running=3, max_batch_size=4,
                                  max_concurrent_requests=64)
    prompts = synthetic(8, (8, 8), (12, 12))
    points = [LoadPoint(concurrency=c, requests=4 * c) for c in (1, 4, 8)]
    one, four, eight = run_load_test(OpenAIBackend(serve_front(server), MODEL), prompts, points, tmp_path)
    figures = "; ".join(f"{p['label']}: {p['output_tokens_per_s']:.1f} tokens/s, client stalled up to "
                        f"{client_stall_s(p):.2f} s" for p in (one, four, eight))  # whole, for a failure
    assert four["stats"]["itl_ms"]["median"] > one["stats"]["itl_ms"]["median"] + 6  # 30 + 3 x 3 running
    assert eight["stats"]["ttft_ms"]["median"] > 4 * four["stats"]["ttft_ms"]["median"]  # waits for a slot
    # Throughput over a point of about 2 s: a process (server and client here) descheduled for a good part of it
    # measures its own stall (load ~11: 4 users at 1.2x one user's). Judged when no point's event loop stalled
    # over 0.2 s (a few ms when the machine is not overloaded); the medians above hold either way.
    if max(client_stall_s(p) for p in (one, four, eight)) <= 0.2:
        assert four["output_tokens_per_s"] > 2.0 * one["output_tokens_per_s"], figures  # 4 / 39 ms vs 1 / 30 ms
        assert eight["output_tokens_per_s"] < 1.4 * four["output_tokens_per_s"], figures


def test_reference_server_process_serves_both_fronts() -> None:
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-m", "pytest_topsail.tgis.server", "--model", MODEL, "--port", "0",
                                "--http-port", "0", "--zero-latency"], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        http_line, grpc_line = process.stdout.readline(), process.stdout.readline()
        assert http_line.startswith("OpenAI-compatible HTTP listening on 127.0.0.1:")
        assert grpc_line.startswith("TGIS reference server listening on 127.0.0.1:")
        status, text = post("http://" + http_line.split()[-1], "/v1/completions",
                            {"model": MODEL, "prompt": "hi", "max_tokens": 2})
        assert status == 200 and json.loads(text)["usage"]["completion_tokens"] == 2
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_itl_factor_from_the_environment_slows_decoding_only() -> None:
    from pytest_topsail.tgis.server import ServerSettings, ServerThread, environment_settings

    assert environment_settings({"TOPSAIL_TGIS_ITL_FACTOR": "2"}) == {"itl_factor": 2.0}
    for bad in ("fast", "0"):
        with pytest.raises(ValueError, match="TOPSAIL_TGIS_ITL_FACTOR must be"):
            environment_settings({"TOPSAIL_TGIS_ITL_FACTOR": bad})
    normal, slow = (ServerSettings(model_name=MODEL, **environment_settings(env))
                    for env in ({}, {"TOPSAIL_TGIS_ITL_FACTOR": "2"}))
    with ServerThread(normal) as one, ServerThread(slow) as two:
        fast, slower = one.backend.latency, two.backend.latency
        assert slower.inter_token_seconds(4) == pytest.approx(2 * fast.inter_token_seconds(4))
        assert slower.prefill_seconds(100) == fast.prefill_seconds(100)
