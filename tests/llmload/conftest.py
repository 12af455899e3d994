"""A small OpenAI-compatible loopback server for the load generator's tests: fixed prefill and inter-token delays,
``max_tokens`` tokens per answer, an error when the prompt says so; it runs in its own thread and event loop."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from aiohttp import web

from pytest_topsail.tgis import generation_pb2 as pb
from pytest_topsail.tgis.generation_pb2_grpc import GenerationServiceServicer, add_GenerationServiceServicer_to_server


@dataclass
class FakeServer:
    prefill_s: float = 0.0
    itl_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)  # each request's Authorization header
    in_flight: int = 0
    max_in_flight: int = 0
    url: str = ""
    # > 0: at most this many requests served at once, the others queue (a server's batch). A slot keeps a fixed pace
    # (each answer's sleeps end at deadlines from the instant its slot became free), so the capacity stays
    # capacity / (prefill_s + (tokens - 1) * itl_s) per second on a loaded machine, where every sleep overshoots.
    capacity: int = 0
    slots: asyncio.Queue[float] | None = None  # the free slots, each as the instant it became free

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.authorizations.append(request.headers.get("Authorization"))
        chat = request.path.endswith("/chat/completions")
        text = body["messages"][-1]["content"] if chat else body["prompt"]
        if "FAIL" in text:
            return web.json_response({"object": "error", "message": "bad prompt", "type": "BadRequestError",
                                      "param": None, "code": 400}, status=400)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if not self.capacity:
                return await self.answer(request, body, chat, len(text.split()), Pace(None))
            if self.slots is None:
                self.slots = asyncio.Queue()
                for _ in range(self.capacity):
                    self.slots.put_nowait(0.0)
            freed = await self.slots.get()
            pace = Pace(max(freed, time.perf_counter()))  # a queued request starts when its slot was freed
            try:
                return await self.answer(request, body, chat, len(text.split()), pace)
            finally:
                self.slots.put_nowait(pace.until)
        finally:
            self.in_flight -= 1

    async def answer(self, request: web.Request, body: dict[str, Any], chat: bool, prompt_tokens: int,
                     pace: Pace) -> web.StreamResponse:
        tokens = int(body["max_tokens"])
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens, "total_tokens": prompt_tokens + tokens}
        await pace.sleep(self.prefill_s)
        if not body.get("stream"):
            await pace.sleep(self.itl_s * (tokens - 1))
            choice = {"message": {"role": "assistant", "content": "x " * tokens}} if chat else {"text": "x " * tokens}
            return web.json_response({"choices": [choice], "usage": usage})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if chat:
            await send(response, {"choices": [{"delta": {"role": "assistant", "content": ""}}]})
        for number in range(tokens):
            if number:
                await pace.sleep(self.itl_s)
            choice = {"delta": {"content": f"t{number} "}} if chat else {"text": f"t{number} "}
            await send(response, {"choices": [choice]})
        await send(response, {"choices": [], "usage": usage})
        await response.write(b"data: [DONE]\n\n")
        return response


class Pace:
    """Sleeps of one answer: relative ones (each at least its length), or, from a start instant, to deadlines."""

    def __init__(self, start: float | None) -> None:
        self.start = start
        self.until = start or 0.0  # the instant the answer's sleeps end (paced)

    async def sleep(self, seconds: float) -> None:
        if self.start is None:
            await asyncio.sleep(seconds)
            return
        self.until += seconds
        await asyncio.sleep(max(0.0, self.until - time.perf_counter()))


def client_stall_s(summary: dict[str, Any]) -> float:
    """The longest stall of the load client's own event loop during a point (its summary's ``client`` figures): an
    answer that arrived meanwhile was stamped late, which timing checks on a loaded machine must allow for."""
    return summary["client"]["loop_lag_max_ms"] / 1000


async def send(response: web.StreamResponse, event: dict[str, Any]) -> None:
    await response.write(f"data: {json.dumps(event)}\n\n".encode())


@pytest.fixture
def background_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in its own thread, for servers the load generator (another loop) talks to."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    loop.close()


def in_loop(loop: asyncio.AbstractEventLoop, coroutine: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=10)


@pytest.fixture
def serve_front(background_loop: asyncio.AbstractEventLoop) -> Iterator[Any]:
    """serve_front(model_server) -> base URL of the reference server's OpenAI front on it, stopped at teardown."""
    from pytest_topsail.tgis.openai_http import OpenAIFront, start_http

    runners = []

    def serve(server: Any) -> str:
        runner, port = in_loop(background_loop, start_http(OpenAIFront(server)))
        runners.append(runner)
        return f"http://127.0.0.1:{port}"

    yield serve
    for runner in runners:
        in_loop(background_loop, runner.cleanup())


@pytest.fixture
def fake_server(background_loop: asyncio.AbstractEventLoop) -> Iterator[FakeServer]:
    server = FakeServer()
    app = web.Application()
    app.router.add_post("/v1/completions", server.handle)
    app.router.add_post("/v1/chat/completions", server.handle)
    runner = web.AppRunner(app)

    async def start() -> None:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        server.url = f"http://127.0.0.1:{runner.addresses[0][1]}"

    in_loop(background_loop, start())
    yield server
    in_loop(background_loop, runner.cleanup())


class FakeTgis(GenerationServiceServicer):
    """A TGIS GenerationService: max_new_tokens tokens, one per message after the first (input count only)."""

    def __init__(self) -> None:
        self.itl_s = 0.0
        self.peers: set[str] = set()
        self.calls = 0
        self.target = ""

    async def GenerateStream(self, request: Any, context: Any) -> Any:  # noqa: N802 (gRPC method name)
        self.calls += 1
        self.peers.add(context.peer())
        if "FAIL" in request.request.text:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "top_p must be > 0.0 and <= 1.0")
        yield pb.GenerationResponse(input_token_count=len(request.request.text.split()))
        for count in range(1, request.params.stopping.max_new_tokens + 1):
            await asyncio.sleep(self.itl_s)
            yield pb.GenerationResponse(generated_token_count=count, text=f"t{count} ")

    async def Generate(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.calls += 1
        tokens = request.params.stopping.max_new_tokens
        return pb.BatchedGenerationResponse(responses=[
            pb.GenerationResponse(input_token_count=len(r.text.split()), generated_token_count=tokens)
            for r in request.requests])


@pytest.fixture
def fake_tgis(background_loop: asyncio.AbstractEventLoop) -> Iterator[FakeTgis]:
    fake = FakeTgis()

    async def start() -> grpc.aio.Server:
        server = grpc.aio.server()  # bound to the loop it is created on
        add_GenerationServiceServicer_to_server(fake, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        fake.target = f"127.0.0.1:{port}"
        return server

    server = in_loop(background_loop, start())
    yield fake
    in_loop(background_loop, server.stop(None))


@pytest.fixture
def tls_tgis(background_loop: asyncio.AbstractEventLoop, tmp_path: Path) -> Iterator[tuple[FakeTgis, Path]]:
    """A TGIS server speaking TLS only; the CA bundle that checks it in ``tmp_path/ca.pem``."""
    from pytest_topsail.sim.run.tls import make_certificates

    certificates = make_certificates()
    (tmp_path / "ca.pem").write_bytes(certificates.ca_pem)
    fake = FakeTgis()

    async def start() -> grpc.aio.Server:
        server = grpc.aio.server()
        add_GenerationServiceServicer_to_server(fake, server)
        credentials = grpc.ssl_server_credentials([(certificates.key_pem, certificates.cert_pem)])
        fake.target = f"127.0.0.1:{server.add_secure_port('127.0.0.1:0', credentials)}"
        await server.start()
        return server

    server = in_loop(background_loop, start())
    yield fake, tmp_path
    in_loop(background_loop, server.stop(None))
