"""gRPC over HTTP/2 on the event loop (pytest_topsail.llmload.backends.grpc_h2, HTTP/2 by h2): what a server may send
(messages split across frames and reads, padding, trailers-only errors, HTTP statuses, RST_STREAM, GOAWAY) from a
server-side h2 connection fed by hand, cancellation and connection loss; flow control and stream limits against a
grpc server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import StreamReset

from pytest_topsail.llmload.backends import grpc_h2
from pytest_topsail.llmload.backends.tgis_grpc import TgisBackend
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.generator import LoadPoint
from pytest_topsail.llmload.run import run_load_test
from pytest_topsail.tgis.generation_pb2_grpc import add_GenerationServiceServicer_to_server
from tests.llmload.conftest import FakeTgis, in_loop


class Wire(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def close(self) -> None:
        self.closed = True


class Peer:
    """A server-side h2 connection wired to a client Connection by hand: what one sends, the other is fed."""

    def __init__(self) -> None:
        self.client = grpc_h2.Connection()
        self.wire = Wire()
        self.client.connection_made(self.wire)
        self.server = H2Connection(H2Configuration(client_side=False, header_encoding=None))
        self.server.initiate_connection()
        self.deliver()

    def deliver(self, split: int = 0) -> None:
        """The client's bytes to the server, the server's to the client (in two reads when ``split``)."""
        self.server.receive_data(self.wire.written)
        self.wire.written = b""
        data = self.server.data_to_send()
        if split:
            self.client.data_received(data[:split])
            data = data[split:]
        if data:
            self.client.data_received(data)

    async def start_call(self, body: bytes = b"hi") -> tuple[asyncio.Task[float], list[bytes]]:
        messages: list[bytes] = []
        task = asyncio.create_task(self.client.call(b"/s/M", HEADERS,
                                                    grpc_h2.grpc_message(body), messages.append))
        await asyncio.sleep(0)
        self.deliver()
        return task, messages


HEADERS = [(b":scheme", b"http"), (b":authority", b"tgis:8033"), (b"content-type", b"application/grpc")]
OK = [(b":status", b"200"), (b"content-type", b"application/grpc")]


def test_messages_across_frames_and_reads_and_the_answers_status() -> None:
    async def scenario() -> None:
        peer = Peer()
        task, messages = await peer.start_call()
        two = grpc_h2.grpc_message(b"first") + grpc_h2.grpc_message(b"second")
        peer.server.send_headers(1, OK)
        peer.server.send_data(1, two[:12], pad_length=3)  # a message and a piece of the next
        peer.deliver(split=20)  # a frame split across reads too
        assert messages == [b"first"]
        peer.server.send_data(1, two[12:])
        peer.deliver()
        assert messages == [b"first", b"second"] and not task.done()
        peer.server.send_headers(1, [(b"grpc-status", b"0")], end_stream=True)
        peer.deliver()
        assert await task > 0

        task, _ = await peer.start_call()  # a trailers-only error, its message percent-encoded
        peer.server.send_headers(3, [(b":status", b"200"), (b"grpc-status", b"3"),
                                     (b"grpc-message", b"top_p must be %3E 0")], end_stream=True)
        peer.deliver()
        with pytest.raises(grpc_h2.GrpcError) as raised:
            await task
        assert (raised.value.code, raised.value.details) == ("INVALID_ARGUMENT", "top_p must be > 0")

        task, _ = await peer.start_call()  # not gRPC: an HTTP status
        peer.server.send_headers(5, [(b":status", b"503")], end_stream=True)
        peer.deliver()
        with pytest.raises(grpc_h2.GrpcError, match="UNAVAILABLE"):
            await task

        task, _ = await peer.start_call()  # the answer ends inside a message
        peer.server.send_headers(7, OK)
        peer.server.send_data(7, grpc_h2.grpc_message(b"whole")[:4])
        peer.server.send_headers(7, [(b"grpc-status", b"0")], end_stream=True)
        peer.deliver()
        with pytest.raises(grpc_h2.GrpcError, match="INTERNAL.*inside a message"):
            await task

        task, _ = await peer.start_call()
        peer.server.reset_stream(9, 0xB)
        peer.deliver()
        with pytest.raises(grpc_h2.GrpcError, match="RESOURCE_EXHAUSTED"):
            await task

        below, _ = await peer.start_call()
        above, _ = await peer.start_call()
        peer.server.close_connection(last_stream_id=11)
        peer.deliver()
        with pytest.raises(grpc_h2.GrpcError, match="UNAVAILABLE.*GOAWAY"):
            await above
        assert not peer.client.usable and not below.done()
        with pytest.raises(grpc_h2.GrpcError, match="UNAVAILABLE"):
            await peer.client.call(b"/s/M", [], b"", lambda _: None)
        peer.client.connection_lost(None)
        with pytest.raises(grpc_h2.GrpcError, match="UNAVAILABLE"):
            await below

    asyncio.run(scenario())


def test_a_refused_stream_is_sent_again_and_a_stream_refused_every_time_fails_unavailable() -> None:
    """REFUSED_STREAM: the server processed nothing (a grpc server can still count an ended stream against its
    limit), so the call is sent again on a new stream, as grpc's transparent retry does; a bounded number of times."""
    async def scenario() -> None:
        peer = Peer()
        messages: list[bytes] = []
        task = asyncio.create_task(peer.client.call(b"/s/M", HEADERS, grpc_h2.grpc_message(b"hi"), messages.append))
        await asyncio.sleep(0)
        peer.deliver()
        peer.server.reset_stream(1, grpc_h2.REFUSED_STREAM)
        peer.deliver()
        while 3 not in peer.client.streams:  # sent again after its backoff
            await asyncio.sleep(0.001)
        peer.deliver()
        peer.server.send_headers(3, OK)
        peer.server.send_data(3, grpc_h2.grpc_message(b"answer"))
        peer.server.send_headers(3, [(b"grpc-status", b"0")], end_stream=True)
        peer.deliver()
        assert await task > 0 and messages == [b"answer"]

        task = asyncio.create_task(peer.client.call(b"/s/M", HEADERS, grpc_h2.grpc_message(b"hi"), messages.append))
        for stream_id in range(5, 5 + 2 * (grpc_h2.RETRIES_OF_REFUSED + 1), 2):
            while stream_id not in peer.client.streams:
                await asyncio.sleep(0.001)
            peer.deliver()
            peer.server.reset_stream(stream_id, grpc_h2.REFUSED_STREAM)
            peer.deliver()
        with pytest.raises(grpc_h2.GrpcError, match="UNAVAILABLE.*0x7"):
            await task

    asyncio.run(scenario())


def test_a_cancelled_call_resets_its_stream_and_a_lost_connection_fails_the_others() -> None:
    async def scenario() -> None:
        peer = Peer()
        cancelled, _ = await peer.start_call()
        running, _ = await peer.start_call()
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        events = peer.server.receive_data(peer.wire.written)
        assert [(type(e), e.stream_id, e.error_code) for e in events] == [(StreamReset, 1, 0x8)]
        peer.client.connection_lost(ConnectionResetError("reset by peer"))
        with pytest.raises(grpc_h2.GrpcError, match="UNAVAILABLE.*reset by peer"):
            await running
        assert not peer.client.usable

    asyncio.run(scenario())


def test_a_message_the_caller_cannot_read_fails_its_call_and_resets_its_stream() -> None:
    async def scenario() -> None:
        peer = Peer()
        task = asyncio.create_task(peer.client.call(b"/s/M", HEADERS, grpc_h2.grpc_message(b"x"), lambda _: 1 / 0))
        await asyncio.sleep(0)
        peer.deliver()
        peer.server.send_headers(1, OK)
        peer.server.send_data(1, grpc_h2.grpc_message(b"bad"))
        peer.deliver()
        with pytest.raises(ZeroDivisionError):
            await task
        events = peer.server.receive_data(peer.wire.written)
        assert [type(e) for e in events] == [StreamReset]

    asyncio.run(scenario())


@pytest.fixture
def limited_tgis(background_loop: asyncio.AbstractEventLoop) -> Any:
    """A TGIS server that lets 2 streams in at once and reads messages up to 8 MB."""
    fake = FakeTgis()

    async def start() -> grpc.aio.Server:
        server = grpc.aio.server(options=[("grpc.max_concurrent_streams", 2),
                                          ("grpc.max_receive_message_length", 8 << 20)])
        add_GenerationServiceServicer_to_server(fake, server)
        fake.target = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        await server.start()
        return server

    server = in_loop(background_loop, start())
    yield fake
    in_loop(background_loop, server.stop(None))


@pytest.mark.parametrize("stream", [True, False])
def test_long_prompts_wait_for_flow_control_and_streams_for_the_servers_limit(limited_tgis: FakeTgis,
                                                                             tmp_path: Path, stream: bool) -> None:
    limited_tgis.itl_s = 0.002
    prompts = [Prompt("word " * 100_000, 100_000, 3), Prompt("short one", 2, 4)]  # 500 KB: 8 windows of 64 KB
    summary = run_load_test(TgisBackend(limited_tgis.target, model="m", stream=stream), prompts,
                            [LoadPoint(concurrency=6, requests=12, timeout_s=30)], tmp_path)[0]
    assert summary["succeeded"] == 12 and summary["failures"] == {}, summary["failures"]
    assert summary["stats"]["input_tokens"]["max"] == 100_000 and summary["stats"]["output_tokens"]["max"] == 4
