"""gRPC calls over one HTTP/2 connection on the event loop; HTTP/2 (framing, HPACK, flow control) is the ``h2``
library's (sans-IO). Ours: the asyncio glue, gRPC's 5-byte message framing, grpc-status/grpc-message as error codes,
waiting for the server's stream limit and windows, RST_STREAM on cancellation, GOAWAY and connection loss.

Why: grpc's Python APIs cost several times more client CPU per call (benchmarks/llm_load.py). Here a call's HEADERS
and prebuilt gRPC-framed body are written at once; answer messages are cut out of DATA in ``data_received`` and
handed to the caller's callback as they are read (timed then); the caller's task is woken once, at its stream's end.
"""

from __future__ import annotations

import asyncio
import collections
import struct
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import grpc
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings

MAX_WINDOW = 2**31 - 1
CANCEL = 0x8  # HTTP/2 error code
STATUS_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}  # grpc-status numbers
# gRPC's http-grpc-status-mapping (an answer that is not HTTP 200) and RST_STREAM codes (RFC 9113 8.7)
HTTP_STATUS_CODES = {b"400": "INTERNAL", b"401": "UNAUTHENTICATED", b"403": "PERMISSION_DENIED",
                     b"404": "UNIMPLEMENTED", **dict.fromkeys((b"429", b"502", b"503", b"504"), "UNAVAILABLE")}
RESET_CODES = {0x7: "UNAVAILABLE", 0x8: "CANCELLED", 0xB: "RESOURCE_EXHAUSTED", 0xC: "PERMISSION_DENIED"}
CONFIG = h2.config.H2Configuration(client_side=True, header_encoding=None, validate_outbound_headers=False,
                                   normalize_outbound_headers=False, validate_inbound_headers=False)


class GrpcError(Exception):
    """A failed call: ``code`` is the gRPC status code's name (``UNAVAILABLE``...), ``details`` its message."""

    def __init__(self, code: str, details: str) -> None:
        super().__init__(f"{code}: {details}")
        self.code, self.details = code, details


class Refused(GrpcError):
    """The server reset the stream with REFUSED_STREAM: nothing of the request was processed (RFC 9113 8.7)."""


REFUSED_STREAM = 0x7
RETRIES_OF_REFUSED = 5  # as grpc's transparent retry: a refused call is sent again on a new stream
REFUSED_BACKOFF_S = 0.005  # doubled at each retry: 155 ms in all


def grpc_message(body: bytes) -> bytes:
    """A gRPC length-prefixed message (not compressed)."""
    return b"\x00" + struct.pack(">I", len(body)) + body


class Stream:  # one call
    __slots__ = ("on_message", "done", "buffer", "headers", "pending")

    def __init__(self, on_message: Callable[[bytes], None], done: asyncio.Future[float]) -> None:
        self.on_message, self.done = on_message, done
        self.buffer = b""  # an incomplete gRPC message
        self.headers: dict[bytes, bytes] = {}  # the answer's headers and trailers
        self.pending = b""  # request bytes waiting for the server's flow-control windows


class Connection(asyncio.Protocol):
    """One HTTP/2 connection to a gRPC server. Calls start once ``ready`` (the server's first SETTINGS: its stream
    limit; the owner awaits it); ``usable`` is False once it takes no new stream (lost, GOAWAY): the owner opens
    another."""

    def __init__(self) -> None:
        self.h2 = h2.connection.H2Connection(CONFIG)
        self.h2.local_settings = h2.settings.Settings(client=True, initial_values={
            h2.settings.SettingCodes.ENABLE_PUSH: 0, h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: MAX_WINDOW})
        self.transport: Any = None
        self.streams: dict[int, Stream] = {}
        self.slots: collections.deque[asyncio.Future[None]] = collections.deque()  # calls waiting for a stream
        self.ready: asyncio.Future[None] | None = None
        self.closed: GrpcError | None = None
        self.going_away = False
        self.received = 0  # connection-window bytes not yet given back

    @property
    def usable(self) -> bool:
        return self.closed is None and not self.going_away

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.ready = asyncio.get_running_loop().create_future()
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(MAX_WINDOW - 65535)
        transport.write(self.h2.data_to_send())

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.fail_all(GrpcError("UNAVAILABLE", f"connection lost: {exc}" if exc else "connection closed"))

    def data_received(self, data: bytes) -> None:
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError as error:
            self.flush_out()  # h2's GOAWAY
            self.fail_all(GrpcError("INTERNAL", f"HTTP/2 protocol error: {error!r}"))
            return
        for event in events:
            stream = self.streams.get(getattr(event, "stream_id", 0) or 0)
            if isinstance(event, h2.events.DataReceived):
                self.received += event.flow_controlled_length
                if stream is not None:
                    self.on_data(event.stream_id, stream, event.data)
            elif isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                if stream is not None:
                    stream.headers.update(event.headers)
            elif isinstance(event, h2.events.StreamEnded):
                if stream is not None:
                    self.finish(event.stream_id, stream)
            elif isinstance(event, h2.events.StreamReset):
                if stream is not None:
                    code = RESET_CODES.get(event.error_code, "INTERNAL")
                    kind = Refused if event.error_code == REFUSED_STREAM else GrpcError
                    self.settle(event.stream_id, kind(code, f"stream reset by the server (HTTP/2 error "
                                                            f"{int(event.error_code):#x})"))
            elif isinstance(event, (h2.events.RemoteSettingsChanged, h2.events.WindowUpdated)):
                if self.ready is not None and not self.ready.done():
                    self.ready.set_result(None)
                for stream_id, stream in list(self.streams.items()):
                    self.send_body(stream_id, stream)
                self.release()
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.go_away(event.last_stream_id or 0, int(event.error_code or 0))
        if self.received >= 2**30:
            self.h2.increment_flow_control_window(self.received)
            self.received = 0
        self.flush_out()

    def on_data(self, stream_id: int, stream: Stream, payload: bytes) -> None:
        """Cut the gRPC messages out of the stream's DATA, each handed over as soon as it is whole."""
        data = stream.buffer + payload if stream.buffer else payload
        pos, size = 0, len(data)
        try:
            while size - pos >= 5:
                length = int.from_bytes(data[pos + 1:pos + 5], "big")
                if size - pos < 5 + length:
                    break
                if data[pos]:
                    raise GrpcError("INTERNAL", "compressed message (no compression was asked for)")
                stream.on_message(data[pos + 5:pos + 5 + length])
                pos += 5 + length
        except Exception as error:  # noqa: BLE001 (a message the caller could not read fails its call)
            self.reset(stream_id)
            self.settle(stream_id, error)
            return
        stream.buffer = data[pos:]

    def finish(self, stream_id: int, stream: Stream) -> None:
        """The stream ended: its status from the trailers (or the trailers-only answer)."""
        ended = time.perf_counter()
        fields = stream.headers
        status = fields.get(b":status")
        grpc_status = fields.get(b"grpc-status")
        error: GrpcError | None = None
        if status != b"200":
            error = GrpcError(HTTP_STATUS_CODES.get(status or b"", "UNKNOWN"), f"HTTP status {status!r}")
        elif grpc_status is None:
            error = GrpcError("UNKNOWN", "the answer ended without a grpc-status")
        elif grpc_status != b"0":
            name = STATUS_NAMES.get(int(grpc_status) if grpc_status.isdigit() else 2, "UNKNOWN")
            error = GrpcError(name, unquote(fields.get(b"grpc-message", b"").decode("latin-1")) or name)
        elif stream.buffer:
            error = GrpcError("INTERNAL", "the answer ended inside a message")
        self.settle(stream_id, error, ended)

    def go_away(self, last_stream_id: int, code: int) -> None:
        self.going_away = True
        error = GrpcError("UNAVAILABLE", f"the server is going away (GOAWAY, HTTP/2 error {code:#x})")
        for stream_id in [s for s in self.streams if s > last_stream_id]:
            self.settle(stream_id, error)
        self.fail_slots(error)

    async def call(self, path: bytes, headers: list[tuple[bytes, bytes]], body: bytes,
                   on_message: Callable[[bytes], None]) -> float:
        """One call of ``path`` with request ``headers`` (the pseudo-headers and gRPC's are added) and ``body`` (one
        gRPC-framed message); each answer message's bytes go to ``on_message`` as they are read. Returns the
        perf_counter time its stream's end was read. Raises GrpcError; cancelled, the stream is reset. A stream the
        server refused (it can still count a just-ended stream against its limit) is sent again, as grpc does."""
        for attempt in range(RETRIES_OF_REFUSED):
            try:
                return await self.call_once(path, headers, body, on_message)
            except Refused:
                await asyncio.sleep(REFUSED_BACKOFF_S * 2**attempt)  # the server frees its ended streams meanwhile
        return await self.call_once(path, headers, body, on_message)

    async def call_once(self, path: bytes, headers: list[tuple[bytes, bytes]], body: bytes,
                        on_message: Callable[[bytes], None]) -> float:
        while self.usable and self.h2.open_outbound_streams >= self.h2.remote_settings.max_concurrent_streams:
            waiter = asyncio.get_running_loop().create_future()
            self.slots.append(waiter)
            await waiter
        if not self.usable or self.transport is None:
            raise self.closed or GrpcError("UNAVAILABLE", "the connection takes no new stream")
        stream_id = self.h2.get_next_available_stream_id()
        done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        stream = self.streams[stream_id] = Stream(on_message, done)
        self.h2.send_headers(stream_id, [(b":method", b"POST"), (b":path", path), *headers])
        stream.pending = body
        self.send_body(stream_id, stream)
        self.flush_out()
        try:
            return await done
        except asyncio.CancelledError:
            if self.streams.pop(stream_id, None) is not None:
                self.reset(stream_id)
                self.flush_out()
                self.release()
            raise

    def send_body(self, stream_id: int, stream: Stream) -> None:
        """What the windows allow of the stream's request body (its last frame ends the stream)."""
        while stream.pending:
            size = min(self.h2.local_flow_control_window(stream_id), self.h2.max_outbound_frame_size,
                       len(stream.pending))
            if size <= 0:
                return
            chunk, stream.pending = stream.pending[:size], stream.pending[size:]
            self.h2.send_data(stream_id, chunk, end_stream=not stream.pending)

    def reset(self, stream_id: int) -> None:
        try:
            self.h2.reset_stream(stream_id, CANCEL)
        except h2.exceptions.ProtocolError:  # already closed on h2's side
            pass

    def flush_out(self) -> None:
        data = self.h2.data_to_send()
        if data and self.transport is not None:
            self.transport.write(data)

    def settle(self, stream_id: int, error: BaseException | None, ended: float = 0.0) -> None:
        stream = self.streams.pop(stream_id, None)
        if stream is not None and not stream.done.done():
            stream.done.set_result(ended) if error is None else stream.done.set_exception(error)
        self.release()

    def release(self) -> None:
        """Let the calls waiting for a stream go on, as many as the server's limit allows."""
        free = self.h2.remote_settings.max_concurrent_streams - self.h2.open_outbound_streams
        while self.slots and free > 0:
            waiter = self.slots.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1
        if self.going_away and not self.streams and self.transport is not None:
            self.transport.close()

    def fail_all(self, error: GrpcError) -> None:
        """Close the connection: every call fails with ``error``."""
        if self.transport is not None:
            self.transport.close()
        if self.closed is None:
            self.closed = error
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(error)
            self.ready.exception()  # retrieved: the callers see it
        streams, self.streams = list(self.streams.values()), {}
        self.fail_slots(error, [stream.done for stream in streams])

    def fail_slots(self, error: GrpcError, calls: list[asyncio.Future[float]] | None = None) -> None:
        """Fail the calls waiting for a stream (and ``calls``)."""
        waiters: list[asyncio.Future[Any]] = [*self.slots, *(calls or [])]
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)
        self.slots.clear()
        self.release()

    def close(self) -> None:
        self.fail_all(GrpcError("CANCELLED", "the client closed the connection"))
