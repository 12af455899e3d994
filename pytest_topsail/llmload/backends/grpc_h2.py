"""A small gRPC client over HTTP/2 on the event loop (no grpc library): one connection, many streams, each call one
request message and its answer messages as they arrive.

Why: grpc's Python APIs cost about 300-500 µs of client CPU per call (call objects, completion queues, a thread or
an event-loop wake-up per event; benchmarks/llm_load.py measured the bare sync stub). Here a call is a prebuilt
header block and a prebuilt body written with one ``transport.write``, and its answer frames are parsed in the
protocol's ``data_received`` where each gRPC message is handed to the caller's callback as its bytes are read (the
time a message is taken is the time it was read). The event loop is woken for a call only at its end.

What it does of HTTP/2 (RFC 9113) and HPACK (RFC 7541): SETTINGS (acknowledged; the peer's initial window, frame size
and stream limit obeyed), PING answered, flow control both ways (the receive windows opened to 2^31-1 at once and the
connection's topped up; request bodies larger than the peer's windows wait for WINDOW_UPDATE), padded and
CONTINUATION header blocks, HPACK decoding with the dynamic table and Huffman strings, RST_STREAM both ways (a
cancelled call resets its stream), GOAWAY (streams above the last one fail UNAVAILABLE, the connection takes no new
stream). Request headers are sent as literals never indexed (the peer's table is never touched). No server push
(disabled), no compression (none asked for).
"""

from __future__ import annotations

import asyncio
import collections
import struct
import time
from collections.abc import Callable
from urllib.parse import unquote

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY = 0x1, 0x1, 0x4, 0x8, 0x20
MAX_WINDOW = 2**31 - 1
DEFAULT_WINDOW = 65535
CANCEL = 0x8
HEADER = struct.Struct(">I")

# grpc status codes by number; HTTP statuses that are not 200 as gRPC codes (gRPC's http-grpc-status-mapping)
STATUS_NAMES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")
HTTP_STATUS_CODES = {"400": "INTERNAL", "401": "UNAUTHENTICATED", "403": "PERMISSION_DENIED", "404": "UNIMPLEMENTED",
                     "429": "UNAVAILABLE", "502": "UNAVAILABLE", "503": "UNAVAILABLE", "504": "UNAVAILABLE"}
RESET_CODES = {0x7: "UNAVAILABLE", 0x8: "CANCELLED", 0xB: "RESOURCE_EXHAUSTED", 0xC: "PERMISSION_DENIED"}  # RFC 9113
                                                                                                    # 8.7, gRPC docs


class GrpcError(Exception):
    """A failed call: ``code`` is the gRPC status code's name (``UNAVAILABLE``...), ``details`` its message."""

    def __init__(self, code: str, details: str) -> None:
        super().__init__(f"{code}: {details}")
        self.code = code
        self.details = details


# -- HPACK ------------------------------------------------------------------------------------------------------------
STATIC_TABLE = (
    (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"), (":path", "/index.html"),
    (":scheme", "http"), (":scheme", "https"), (":status", "200"), (":status", "204"), (":status", "206"),
    (":status", "304"), (":status", "400"), (":status", "404"), (":status", "500"), ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""), ("accept", ""),
    ("access-control-allow-origin", ""), ("age", ""), ("allow", ""), ("authorization", ""), ("cache-control", ""),
    ("content-disposition", ""), ("content-encoding", ""), ("content-language", ""), ("content-length", ""),
    ("content-location", ""), ("content-range", ""), ("content-type", ""), ("cookie", ""), ("date", ""),
    ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""), ("if-match", ""),
    ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""), ("if-unmodified-since", ""),
    ("last-modified", ""), ("link", ""), ("location", ""), ("max-forwards", ""), ("proxy-authenticate", ""),
    ("proxy-authorization", ""), ("range", ""), ("referer", ""), ("refresh", ""), ("retry-after", ""),
    ("server", ""), ("set-cookie", ""), ("strict-transport-security", ""), ("transfer-encoding", ""),
    ("user-agent", ""), ("vary", ""), ("via", ""), ("www-authenticate", ""))

# RFC 7541 appendix B: the Huffman code's lengths of symbols 0-256 (the code is canonical: rebuilt from its lengths)
HUFFMAN_LENGTHS = bytes.fromhex(
    "0d171c1c1c1c1c1c1c181e1c1c1e1c1c1c1c1c1c1c1c1e1c1c1c1c1c1c1c1c1c060a0a0c0d06080b0a0a080b080606060505050606060606"
    "060607080f060c0a0d06070707070707070707070707070707070707070707070807080d130d0e060f050605060506060605070706060605"
    "06070605050607070707070f0b0e0d1c14161414161616171617171717171817181816171817171717151617161717181615141616171715"
    "1716161815161717151516151716171714161616171616171a1a1413161716191a1a1a1b1b1a181913151a1b1b1a1b1815151a1a1c1b1b1b"
    "14181415161515171616191918181a171a1b1a1a1b1b1b1b1b1c1b1b1b1b1b1a1e")


def huffman_codes() -> dict[tuple[int, int], int]:
    """{(length, code): symbol} of the canonical code: by length, then by symbol, each code the previous one + 1."""
    codes: dict[tuple[int, int], int] = {}
    code, previous = 0, 0
    for symbol in sorted(range(257), key=lambda s: (HUFFMAN_LENGTHS[s], s)):
        length = HUFFMAN_LENGTHS[symbol]
        code <<= length - previous
        previous = length
        codes[(length, code)] = symbol
        code += 1
    return codes


HUFFMAN = huffman_codes()


def huffman_decode(data: bytes) -> bytes:
    out = bytearray()
    code, length = 0, 0
    for byte in data:
        for shift in range(7, -1, -1):
            code = (code << 1) | ((byte >> shift) & 1)
            length += 1
            symbol = HUFFMAN.get((length, code))
            if symbol is not None:
                if symbol == 256:
                    raise GrpcError("INTERNAL", "HPACK: EOS in a Huffman string")
                out.append(symbol)
                code, length = 0, 0
    if length > 7 or code != (1 << length) - 1:
        raise GrpcError("INTERNAL", "HPACK: bad Huffman padding")
    return bytes(out)


def decode_integer(data: bytes, pos: int, prefix: int) -> tuple[int, int]:
    """The integer at ``pos`` with a ``prefix``-bit prefix, and the position after it."""
    mask = (1 << prefix) - 1
    value = data[pos] & mask
    pos += 1
    if value < mask:
        return value, pos
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value += (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def encode_integer(value: int, prefix: int, flags: int = 0) -> bytes:
    mask = (1 << prefix) - 1
    if value < mask:
        return bytes([flags | value])
    out = bytearray([flags | mask])
    value -= mask
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_headers(headers: list[tuple[str, str]]) -> bytes:
    """A header block of literals never indexed, new names (no state shared with the peer's decoder)."""
    block = bytearray()
    for name, value in headers:
        raw_name, raw_value = name.encode("latin-1"), value.encode("latin-1")
        block += b"\x10" + encode_integer(len(raw_name), 7) + raw_name + encode_integer(len(raw_value), 7) + raw_value
    return bytes(block)


class HpackDecoder:
    """The peer's header blocks, with its dynamic table (latin-1 strings: octet lengths count for its size)."""

    def __init__(self, max_size: int = 4096) -> None:
        self.table: collections.deque[tuple[str, str]] = collections.deque()  # newest first
        self.size = 0
        self.max_size = max_size

    def entry(self, index: int) -> tuple[str, str]:
        if 1 <= index <= len(STATIC_TABLE):
            return STATIC_TABLE[index - 1]
        if 0 <= index - len(STATIC_TABLE) - 1 < len(self.table):
            return self.table[index - len(STATIC_TABLE) - 1]
        raise GrpcError("INTERNAL", f"HPACK: no header table entry {index}")

    def string(self, data: bytes, pos: int) -> tuple[str, int]:
        huffman = data[pos] & 0x80
        length, pos = decode_integer(data, pos, 7)
        raw = data[pos:pos + length]
        if len(raw) < length:
            raise GrpcError("INTERNAL", "HPACK: truncated string")
        return (huffman_decode(raw) if huffman else raw).decode("latin-1"), pos + length

    def add(self, name: str, value: str) -> None:
        self.table.appendleft((name, value))
        self.size += len(name) + len(value) + 32
        self.evict()

    def evict(self) -> None:
        while self.size > self.max_size and self.table:
            name, value = self.table.pop()
            self.size -= len(name) + len(value) + 32

    def decode(self, data: bytes) -> list[tuple[str, str]]:
        headers: list[tuple[str, str]] = []
        pos, end = 0, len(data)
        while pos < end:
            byte = data[pos]
            if byte & 0x80:  # indexed
                index, pos = decode_integer(data, pos, 7)
                headers.append(self.entry(index))
                continue
            if byte & 0xE0 == 0x20:  # dynamic table size update
                self.max_size, pos = decode_integer(data, pos, 5)
                self.evict()
                continue
            indexing = bool(byte & 0x40)
            index, pos = decode_integer(data, pos, 6 if indexing else 4)
            if index:
                name = self.entry(index)[0]
            else:
                name, pos = self.string(data, pos)
            value, pos = self.string(data, pos)
            headers.append((name, value))
            if indexing:
                self.add(name, value)
        return headers


# -- frames -----------------------------------------------------------------------------------------------------------
def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(len(payload))[1:] + bytes((kind, flags)) + HEADER.pack(stream_id) + payload


def grpc_message(body: bytes) -> bytes:
    """A gRPC length-prefixed message (not compressed)."""
    return b"\x00" + HEADER.pack(len(body)) + body


class Stream:
    """One call: its answer's headers, messages and end."""

    __slots__ = ("id", "on_message", "done", "buffer", "headers", "trailers", "pending", "window", "ended")

    def __init__(self, stream_id: int, on_message: Callable[[bytes], None], done: asyncio.Future[None],
                 window: int) -> None:
        self.id = stream_id
        self.on_message = on_message
        self.done = done
        self.buffer = b""  # an incomplete gRPC message
        self.headers: list[tuple[str, str]] | None = None
        self.trailers: list[tuple[str, str]] | None = None
        self.pending = b""  # request bytes waiting for the peer's flow-control window
        self.window = window  # what the peer lets this stream send
        self.ended = 0.0  # perf_counter when the answer's end was read


class Connection(asyncio.Protocol):
    """One HTTP/2 connection to a gRPC server. Calls start once ``ready`` (the server's first SETTINGS: a server
    refuses streams above a limit it has not told yet); ``call`` runs one call; ``usable`` is False once it takes no
    new stream (lost, GOAWAY, stream ids used up): the owner opens another."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.streams: dict[int, Stream] = {}
        self.next_id = 1
        self.decoder = HpackDecoder()
        self.block: tuple[int, int, bytearray] | None = None  # a header block awaiting CONTINUATION: id, flags, bytes
        self.send_window = DEFAULT_WINDOW  # the peer's connection window for what we send
        self.initial_window = DEFAULT_WINDOW  # ... and each new stream's
        self.max_frame = 16384
        self.max_streams = 2**31
        self.slots: collections.deque[asyncio.Future[None]] = collections.deque()  # calls waiting for a stream
        self.received = 0  # DATA bytes received since the connection window was last topped up
        self.closed: GrpcError | None = None
        self.going_away = False
        self.ready: asyncio.Future[None] | None = None  # the peer's first SETTINGS came (its stream limit is known)

    @property
    def usable(self) -> bool:
        return self.closed is None and not self.going_away and self.next_id < MAX_WINDOW

    # -- asyncio.Protocol --
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.ready = asyncio.get_running_loop().create_future()
        settings = struct.pack(">HIHI", 0x2, 0, 0x4, MAX_WINDOW)  # no push; stream windows wide open
        transport.write(PREFACE + frame(SETTINGS, 0, 0, settings)
                        + frame(WINDOW_UPDATE, 0, 0, HEADER.pack(MAX_WINDOW - DEFAULT_WINDOW)))

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail_all(GrpcError("UNAVAILABLE", f"connection lost: {exc}" if exc else "connection closed"))

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data if self.buffer else data
        pos, size = 0, len(buffer)
        try:
            while size - pos >= 9:
                length = int.from_bytes(buffer[pos:pos + 3], "big")
                if size - pos < 9 + length:
                    break
                kind, flags = buffer[pos + 3], buffer[pos + 4]
                stream_id = HEADER.unpack_from(buffer, pos + 5)[0] & MAX_WINDOW
                payload = buffer[pos + 9:pos + 9 + length]
                pos += 9 + length
                if kind == DATA:
                    self.on_data(stream_id, flags, payload)
                elif kind == HEADERS or kind == CONTINUATION:
                    self.on_headers(kind, stream_id, flags, payload)
                else:
                    self.on_control(kind, stream_id, flags, payload)
        except GrpcError as error:  # the connection's state is lost (a header block we could not decode)
            self.abort(error)
            return
        self.buffer = buffer[pos:]
        if self.received >= 2**30 and self.transport is not None:
            self.transport.write(frame(WINDOW_UPDATE, 0, 0, HEADER.pack(self.received)))
            self.received = 0

    # -- frames received --
    def on_data(self, stream_id: int, flags: int, payload: bytes) -> None:
        self.received += len(payload)
        stream = self.streams.get(stream_id)
        if stream is None:
            return
        if flags & PADDED:
            payload = payload[1:len(payload) - payload[0]]
        data = stream.buffer + payload if stream.buffer else payload
        pos, size = 0, len(data)
        try:
            while size - pos >= 5:
                length = HEADER.unpack_from(data, pos + 1)[0]
                if size - pos < 5 + length:
                    break
                if data[pos]:
                    raise GrpcError("INTERNAL", "compressed message (no compression was asked for)")
                stream.on_message(data[pos + 5:pos + 5 + length])
                pos += 5 + length
        except Exception as error:  # noqa: BLE001 (a message the caller could not read fails its call)
            self.reset(stream, error)
            return
        stream.buffer = data[pos:]
        if flags & END_STREAM:
            self.finish(stream)

    def on_headers(self, kind: int, stream_id: int, flags: int, payload: bytes) -> None:
        if kind == HEADERS:
            if flags & PADDED:
                payload = payload[1:len(payload) - payload[0]]
            if flags & PRIORITY:
                payload = payload[5:]
            self.block = (stream_id, flags, bytearray(payload))
        elif self.block is None or self.block[0] != stream_id:
            raise GrpcError("INTERNAL", "HTTP/2: CONTINUATION out of a header block")
        else:
            self.block[2].extend(payload)
        if not flags & END_HEADERS:
            return
        stream_id, first_flags, block = self.block
        self.block = None
        headers = self.decoder.decode(bytes(block))  # decoded even for a stream we dropped: the table changes
        stream = self.streams.get(stream_id)
        if stream is None:
            return
        if stream.headers is None:
            stream.headers = headers
        else:
            stream.trailers = headers
        if first_flags & END_STREAM:
            self.finish(stream)

    def on_control(self, kind: int, stream_id: int, flags: int, payload: bytes) -> None:
        transport = self.transport
        if kind == SETTINGS and not flags & ACK:
            for offset in range(0, len(payload) - 5, 6):
                key, value = struct.unpack_from(">HI", payload, offset)
                if key == 0x4:
                    for stream in self.streams.values():
                        stream.window += value - self.initial_window
                    self.initial_window = value
                elif key == 0x5:
                    self.max_frame = value
                elif key == 0x3:
                    self.max_streams = value
            if transport is not None:
                transport.write(frame(SETTINGS, ACK, 0))
            if self.ready is not None and not self.ready.done():
                self.ready.set_result(None)
            self.flush_all()
            self.release()
        elif kind == PING and not flags & ACK:
            if transport is not None:
                transport.write(frame(PING, ACK, 0, payload))
        elif kind == WINDOW_UPDATE:
            increment = HEADER.unpack_from(payload)[0] & MAX_WINDOW
            if stream_id == 0:
                self.send_window += increment
                self.flush_all()
            elif (stream := self.streams.get(stream_id)) is not None:
                stream.window += increment
                self.flush(stream)
        elif kind == RST_STREAM:
            stream = self.streams.pop(stream_id, None)
            if stream is not None:
                code = HEADER.unpack_from(payload)[0]
                self.settle(stream, GrpcError(RESET_CODES.get(code, "INTERNAL"), f"stream reset by the server "
                                                                                 f"(HTTP/2 error {code:#x})"))
        elif kind == GOAWAY:
            last, code = struct.unpack_from(">II", payload)
            last &= MAX_WINDOW
            self.going_away = True
            message = f"the server is going away (GOAWAY, HTTP/2 error {code:#x})"
            for stream in [s for s in self.streams.values() if s.id > last]:
                del self.streams[stream.id]
                self.settle(stream, GrpcError("UNAVAILABLE", message))
            for waiter in self.slots:
                if not waiter.done():
                    waiter.set_exception(GrpcError("UNAVAILABLE", message))
            self.slots.clear()
            if not self.streams and transport is not None:
                transport.close()

    # -- calls --
    async def call(self, header_block: bytes, body: bytes, on_message: Callable[[bytes], None]) -> float:
        """One call: ``header_block`` (HPACK-encoded request headers, see ``encode_headers``) and ``body`` (one
        gRPC-framed message); each answer message's bytes go to ``on_message`` as they are read. Returns the
        perf_counter time its answer's end was read. Raises GrpcError; cancelled, the stream is reset."""
        while len(self.streams) >= self.max_streams and self.usable:
            waiter = asyncio.get_running_loop().create_future()
            self.slots.append(waiter)
            await waiter
        if not self.usable or self.transport is None:
            raise self.closed or GrpcError("UNAVAILABLE", "the connection takes no new stream")
        stream_id = self.next_id
        self.next_id += 2
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        stream = self.streams[stream_id] = Stream(stream_id, on_message, done, self.initial_window)
        headers = frame(HEADERS, END_HEADERS, stream_id, header_block)
        sendable = min(self.send_window, stream.window, self.max_frame)
        if len(body) <= sendable:
            self.send_window -= len(body)
            stream.window -= len(body)
            self.transport.write(headers + frame(DATA, END_STREAM, stream_id, body))
        else:
            self.transport.write(headers)
            stream.pending = body
            self.flush(stream)
        try:
            await done
            return stream.ended
        except asyncio.CancelledError:
            if self.streams.pop(stream_id, None) is not None and self.transport is not None and not self.closed:
                self.transport.write(frame(RST_STREAM, 0, stream_id, HEADER.pack(CANCEL)))
                self.release()
            raise

    def flush(self, stream: Stream) -> None:
        """Send what the windows allow of the stream's request body (its last frame ends the stream)."""
        while stream.pending and self.transport is not None:
            size = min(self.send_window, stream.window, self.max_frame, len(stream.pending))
            if size <= 0:
                return
            chunk, stream.pending = stream.pending[:size], stream.pending[size:]
            self.send_window -= size
            stream.window -= size
            self.transport.write(frame(DATA, 0 if stream.pending else END_STREAM, stream.id, chunk))

    def flush_all(self) -> None:
        for stream in list(self.streams.values()):
            if stream.pending:
                self.flush(stream)

    def finish(self, stream: Stream) -> None:
        """The stream ended: its status from the trailers (or the trailers-only answer)."""
        if self.streams.pop(stream.id, None) is None:
            return
        stream.ended = time.perf_counter()
        headers = stream.headers or []
        fields = dict(headers + (stream.trailers or []))
        status = fields.get(":status")
        error: GrpcError | None = None
        if status != "200":
            error = GrpcError(HTTP_STATUS_CODES.get(status or "", "UNKNOWN"), f"HTTP status {status}")
        elif "grpc-status" not in fields:
            error = GrpcError("UNKNOWN", "the answer ended without a grpc-status")
        elif fields["grpc-status"] != "0":
            number = int(fields["grpc-status"]) if fields["grpc-status"].isdigit() else 2
            name = STATUS_NAMES[number] if number < len(STATUS_NAMES) else "UNKNOWN"
            error = GrpcError(name, unquote(fields.get("grpc-message", ""), encoding="utf-8") or name)
        elif stream.buffer:
            error = GrpcError("INTERNAL", "the answer ended inside a message")
        self.settle(stream, error)

    def reset(self, stream: Stream, error: BaseException) -> None:
        if self.streams.pop(stream.id, None) is None:
            return
        if self.transport is not None:
            self.transport.write(frame(RST_STREAM, 0, stream.id, HEADER.pack(CANCEL)))
        self.settle(stream, error)

    def settle(self, stream: Stream, error: BaseException | None) -> None:
        if not stream.done.done():
            if error is None:
                stream.done.set_result(None)
            else:
                stream.done.set_exception(error)
        self.release()

    def release(self) -> None:
        """Let the calls waiting for a stream slot go on, as many as there are slots."""
        while self.slots and len(self.streams) < self.max_streams:
            waiter = self.slots.popleft()
            if not waiter.done():
                waiter.set_result(None)
        if self.going_away and not self.streams and self.transport is not None:
            self.transport.close()

    def abort(self, error: GrpcError) -> None:
        if self.transport is not None:
            self.transport.close()
        self.fail_all(error)

    def fail_all(self, error: GrpcError) -> None:
        if self.closed is None:
            self.closed = error
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(error)
        streams, self.streams = list(self.streams.values()), {}
        for stream in streams:
            if not stream.done.done():
                stream.done.set_exception(error)
        for waiter in self.slots:
            if not waiter.done():
                waiter.set_exception(error)
        self.slots.clear()

    def close(self) -> None:
        self.abort(GrpcError("CANCELLED", "the client closed the connection"))
