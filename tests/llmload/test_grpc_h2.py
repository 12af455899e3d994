"""gRPC over HTTP/2 on the event loop (pytest_topsail.llmload.backends.grpc_h2): HPACK against RFC 7541's examples,
the frames a server may send (split messages, padding, CONTINUATION, trailers-only errors, RST_STREAM, GOAWAY) on a
connection fed by hand, and flow control and stream limits against a grpc server."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import grpc
import pytest

from pytest_topsail.llmload.backends import grpc_h2 as h2
from pytest_topsail.llmload.backends.tgis_grpc import TgisBackend
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.generator import LoadPoint
from pytest_topsail.llmload.run import run_load_test
from pytest_topsail.tgis.generation_pb2_grpc import add_GenerationServiceServicer_to_server
from tests.llmload.conftest import FakeTgis, in_loop


def test_hpack_integers_and_rfc_7541_examples() -> None:
    assert h2.encode_integer(10, 5) == b"\x0a" and h2.encode_integer(1337, 5) == bytes.fromhex("1f9a0a")  # C.1
    assert h2.decode_integer(bytes.fromhex("1f9a0a"), 0, 5) == (1337, 3)
    decoder = h2.HpackDecoder()  # C.4: requests with Huffman strings, one dynamic table across them
    assert decoder.decode(bytes.fromhex("828684418cf1e3c2e5f23a6ba0ab90f4ff")) == [
        (":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")]
    assert decoder.decode(bytes.fromhex("828684be5886a8eb10649cbf"))[-2:] == [
        (":authority", "www.example.com"), ("cache-control", "no-cache")]
    assert decoder.decode(bytes.fromhex("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"))[-1] == (
        "custom-key", "custom-value")
    assert decoder.size == 164
    decoder = h2.HpackDecoder(256)  # C.6: responses, Huffman, entries evicted from a 256-octet table
    decoder.decode(bytes.fromhex("488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863"
                                 "c78f0b97c8e9ae82ae43d3"))
    assert decoder.decode(bytes.fromhex("4883640effc1c0bf")) == [
        (":status", "307"), ("cache-control", "private"), ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        ("location", "https://www.example.com")]
    plain = [("grpc-status", "0"), ("x-long", "v" * 300)]
    assert h2.HpackDecoder().decode(h2.encode_headers(plain)) == plain


class Wire(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def close(self) -> None:
        self.closed = True


LAST = h2.END_HEADERS | h2.END_STREAM  # a header block that ends its stream
OK_HEADERS = h2.encode_headers([(":status", "200"), ("content-type", "application/grpc")])
OK_TRAILERS = h2.encode_headers([("grpc-status", "0")])


async def start_call(connection: h2.Connection, body: bytes = b"hi") -> tuple[asyncio.Task[float], list[bytes]]:
    messages: list[bytes] = []
    task = asyncio.create_task(connection.call(b"", h2.grpc_message(body), messages.append))
    await asyncio.sleep(0)
    return task, messages


def test_frames_a_server_may_send() -> None:
    async def scenario() -> None:
        connection = h2.Connection()
        connection.connection_made(Wire())
        task, messages = await start_call(connection)
        two = h2.grpc_message(b"first") + h2.grpc_message(b"second")
        padded = bytes([3]) + two[:9] + b"\0\0\0"  # a padded frame holding a message and a piece of the next
        half = len(OK_HEADERS) // 2
        connection.data_received(h2.frame(h2.HEADERS, 0, 1, OK_HEADERS[:half]))
        connection.data_received(h2.frame(h2.CONTINUATION, h2.END_HEADERS, 1, OK_HEADERS[half:])
                                 + h2.frame(h2.DATA, h2.PADDED, 1, padded)[:7])  # frames split across reads too
        connection.data_received(h2.frame(h2.DATA, h2.PADDED, 1, padded)[7:] + h2.frame(h2.DATA, 0, 1, two[9:]))
        assert messages == [b"first", b"second"] and not task.done()
        connection.data_received(h2.frame(h2.HEADERS, LAST, 1, OK_TRAILERS))
        assert await task > 0

        task, _ = await start_call(connection)  # a trailers-only error, its message percent-encoded
        connection.data_received(h2.frame(h2.HEADERS, LAST, 3, h2.encode_headers(
            [(":status", "200"), ("grpc-status", "3"), ("grpc-message", "top_p must be %3E 0")])))
        with pytest.raises(h2.GrpcError) as raised:
            await task
        assert (raised.value.code, raised.value.details) == ("INVALID_ARGUMENT", "top_p must be > 0")

        task, _ = await start_call(connection)  # not gRPC: an HTTP status
        connection.data_received(h2.frame(h2.HEADERS, LAST, 5, h2.encode_headers([(":status", "503")])))
        with pytest.raises(h2.GrpcError, match="UNAVAILABLE"):
            await task

        task, _ = await start_call(connection)
        connection.data_received(h2.frame(h2.RST_STREAM, 0, 7, struct.pack(">I", 0xB)))
        with pytest.raises(h2.GrpcError, match="RESOURCE_EXHAUSTED"):
            await task

        below, _ = await start_call(connection)
        above, _ = await start_call(connection)
        connection.data_received(h2.frame(h2.GOAWAY, 0, 0, struct.pack(">II", 9, 0)))
        with pytest.raises(h2.GrpcError, match="UNAVAILABLE.*GOAWAY"):
            await above
        assert not connection.usable and not below.done()
        connection.data_received(h2.frame(h2.HEADERS, h2.END_HEADERS, 9, OK_HEADERS)
                                 + h2.frame(h2.HEADERS, LAST, 9, OK_TRAILERS))
        await below
        assert connection.transport is not None and connection.transport.closed  # type: ignore[attr-defined]

    asyncio.run(scenario())


def test_a_cancelled_call_resets_its_stream_and_a_lost_connection_fails_the_others() -> None:
    async def scenario() -> None:
        connection = h2.Connection()
        wire = Wire()
        connection.connection_made(wire)
        cancelled, _ = await start_call(connection)
        running, _ = await start_call(connection)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert wire.written.endswith(h2.frame(h2.RST_STREAM, 0, 1, struct.pack(">I", 0x8)))
        connection.connection_lost(ConnectionResetError("reset by peer"))
        with pytest.raises(h2.GrpcError, match="UNAVAILABLE.*reset by peer"):
            await running
        assert not connection.usable

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
