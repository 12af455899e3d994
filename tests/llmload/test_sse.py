"""The OpenAI backend's server-sent events reader: events split anywhere by the network, CRLF line ends, comments,
several events in one read, a last event without its newline; every token chunk timed as it arrives."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from pytest_topsail.llmload.backends.openai_http import OpenAIBackend
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.generator import LoadPoint
from pytest_topsail.llmload.run import run_load_test
from tests.llmload.conftest import client_stall_s, in_loop

GAP_S = 0.1  # long beside a loaded machine's scheduling delays (tens of ms at load ~30)


def event(body: dict[str, object], end: bytes = b"\n\n") -> bytes:
    return b"data: " + json.dumps(body).encode() + end


# Network writes as a server or proxy may cut them: (bytes, then pause before the next write?)
WRITES = [
    (b": keep-alive comment\r\n\r\n" + event({"choices": [{"text": "a"}]}, b"\r\n\r\n"), True),
    (event({"choices": [{"text": "b"}]})[:9], False),  # cut inside the JSON ...
    (event({"choices": [{"text": "b"}]})[9:], True),  # ... completed by the next read
    (event({"choices": [{"text": ""}]}) + event({"choices": [{"text": "c"}]}), True),  # empty text: no token
    (event({"choices": [{"text": "d"}]}) + b"event: message\n", True),
    (event({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 4}}, b""), False),  # no newline
]


PEERS: list[object] = []  # each request's client address, as the server saw it


def serve(background_loop: asyncio.AbstractEventLoop, writes: list[tuple[bytes, bool]]) -> Iterator[str]:
    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        PEERS.append(request.transport.get_extra_info("peername") if request.transport else None)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for data, pause in writes:
            await response.write(data)
            if pause:
                await asyncio.sleep(GAP_S)
        return response

    app = web.Application()
    app.router.add_post("/v1/completions", handle)
    runner = web.AppRunner(app)

    async def start() -> str:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield in_loop(background_loop, start())
    in_loop(background_loop, runner.cleanup())


@pytest.fixture
def sse_url(background_loop: asyncio.AbstractEventLoop) -> Iterator[str]:
    yield from serve(background_loop, WRITES)


@pytest.fixture
def done_url(background_loop: asyncio.AbstractEventLoop) -> Iterator[str]:
    PEERS.clear()
    # the end of the answer (the chunked terminator) comes a moment after [DONE], as from a busy server
    yield from serve(background_loop, [(event({"choices": [{"text": "a"}]}) + b"data: [DONE]\n\n", True)])


def test_events_are_read_whatever_the_network_cuts(sse_url: str, tmp_path: Path) -> None:
    summary = run_load_test(OpenAIBackend(sse_url, "toy"), [Prompt("hi", 1, 4)],
                            [LoadPoint(concurrency=1, requests=2)], tmp_path)[0]
    assert summary["succeeded"] == 2, summary["failures"]
    for line in (tmp_path / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        assert (record["input_tokens"], record["output_tokens"]) == (7, 4)
        times = [when for when, count in record["chunks"]]
        assert len(times) == 4 and record["first_token"] == times[0]
        # a, b, c and d arrive GAP_S apart: each timed when its own bytes arrived, not when the stream ended; less
        # what the client says its own event loop stalled (a chunk read late makes the next gap that much shorter)
        stalled_s = client_stall_s(summary)
        gaps = [later - earlier for earlier, later in zip(times[:-1], times[1:], strict=True)]
        assert all(GAP_S * 0.8 - stalled_s <= gap < GAP_S * 6 + stalled_s for gap in gaps), (gaps, stalled_s)
        assert times[-1] <= record["end"]


def test_each_user_keeps_its_connection(done_url: str, tmp_path: Path) -> None:
    """The stream is read to its end after [DONE], so its connection goes back to the pool (else: a new one)."""
    summary = run_load_test(OpenAIBackend(done_url, "toy"), [Prompt("hi", 1, 1)],
                            [LoadPoint(concurrency=3, requests=30)], tmp_path)[0]
    assert summary["succeeded"] == 30 and len(PEERS) == 30
    assert len(set(PEERS)) <= 3, f"{len(set(PEERS))} connections for 3 users"
