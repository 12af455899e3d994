"""SPDY/3.1 framing, the server side of what Kubernetes streaming clients speak (kubectl port-forward).

Only the framing layer: frames are parsed from a byte stream and encoded to bytes; the caller owns the transport and
the streams. Header blocks (SYN_STREAM, SYN_REPLY, HEADERS) are zlib-compressed with the protocol's preset dictionary,
one compression context per direction for the whole connection. No flow control: Kubernetes' SPDY peers ignore
WINDOW_UPDATE.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

VERSION = 3
DATA = 0
SYN_STREAM = 1
SYN_REPLY = 2
RST_STREAM = 3
SETTINGS = 4
PING = 6
GOAWAY = 7
HEADERS = 8
WINDOW_UPDATE = 9
FLAG_FIN = 0x01
RST_PROTOCOL_ERROR = 1
RST_INVALID_STREAM = 2
RST_CANCEL = 5
MAX_FRAME_PAYLOAD = 0xFFFFFF
MAX_HEADER_BLOCK = 1024 * 1024

# The preset zlib dictionary of SPDY/3 header blocks: length-prefixed words, then a run of common text.
_DICTIONARY_WORDS = (
    "options head post put delete trace accept accept-charset accept-encoding accept-language accept-ranges age "
    "allow authorization cache-control connection content-base content-encoding content-language content-length "
    "content-location content-md5 content-range content-type date etag expect expires from host if-match "
    "if-modified-since if-none-match if-range if-unmodified-since last-modified location max-forwards pragma "
    "proxy-authenticate proxy-authorization range referer retry-after server te trailer transfer-encoding upgrade "
    "user-agent vary via warning www-authenticate method get status"
).split() + ["200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin"]
_DICTIONARY_TEXT = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack(">I", len(word)) + word.encode() for word in _DICTIONARY_WORDS) + \
    _DICTIONARY_TEXT.encode()


class SpdyError(Exception):
    """The peer sent bytes that are not valid SPDY/3.1."""


@dataclass
class Frame:
    kind: int  # DATA or a control frame type
    flags: int
    stream_id: int = 0
    data: bytes = b""  # DATA payload
    headers: dict[str, str] = field(default_factory=dict)  # SYN_STREAM, SYN_REPLY, HEADERS
    value: int = 0  # PING id, RST_STREAM / GOAWAY status, WINDOW_UPDATE delta

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


class Codec:
    """One connection's framing state: `feed(bytes)` returns the complete frames received; the other methods return
    the bytes of one frame to send."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(zdict=DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames = []
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if len(self._buffer) < 8 + length:
                break
            head, payload = bytes(self._buffer[:8]), bytes(self._buffer[8:8 + length])
            del self._buffer[:8 + length]
            frames.append(self._parse(head, payload))
        return frames

    def _parse(self, head: bytes, payload: bytes) -> Frame:
        first, flags = int.from_bytes(head[:4], "big"), head[4]
        if not first & 0x80000000:
            return Frame(DATA, flags, first & 0x7FFFFFFF, data=payload)
        version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
        if version != VERSION:
            raise SpdyError(f"unsupported SPDY version {version}")
        if kind in (SYN_STREAM, SYN_REPLY, HEADERS, RST_STREAM, PING, GOAWAY, WINDOW_UPDATE) and len(payload) < 4:
            raise SpdyError(f"control frame {kind} too short")
        word = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
        if kind == SYN_STREAM:
            return Frame(kind, flags, word, headers=self._headers(payload[10:]))
        if kind in (SYN_REPLY, HEADERS):
            return Frame(kind, flags, word, headers=self._headers(payload[4:]))
        if kind in (RST_STREAM, WINDOW_UPDATE, GOAWAY):
            return Frame(kind, flags, word, value=int.from_bytes(payload[4:8], "big"))
        if kind == PING:
            return Frame(kind, flags, value=int.from_bytes(payload[:4], "big"))
        return Frame(kind, flags)  # SETTINGS and unknown control frames: nothing a server must act on

    def _headers(self, block: bytes) -> dict[str, str]:
        try:
            raw = self._inflate.decompress(block, MAX_HEADER_BLOCK)
        except zlib.error as error:
            raise SpdyError(f"header block does not decompress: {error}") from None
        headers: dict[str, str] = {}
        try:
            count, offset = struct.unpack_from(">I", raw, 0)[0], 4
            for _ in range(count):
                size = struct.unpack_from(">I", raw, offset)[0]
                name = raw[offset + 4:offset + 4 + size].decode()
                offset += 4 + size
                size = struct.unpack_from(">I", raw, offset)[0]
                value = raw[offset + 4:offset + 4 + size].decode()
                offset += 4 + size
                headers[name.lower()] = value.split("\0")[0]
        except (struct.error, UnicodeDecodeError) as error:
            raise SpdyError(f"malformed header block: {error}") from None
        return headers

    # ----------------------------------------------------------------- encoding
    @staticmethod
    def _control(kind: int, flags: int, payload: bytes) -> bytes:
        return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload

    def data(self, stream_id: int, payload: bytes = b"", fin: bool = False) -> bytes:
        """DATA frames carrying `payload` (split at the frame size limit); the last one has FIN when asked."""
        chunks = [payload[i:i + MAX_FRAME_PAYLOAD] for i in range(0, len(payload), MAX_FRAME_PAYLOAD)] or [b""]
        frames = []
        for index, chunk in enumerate(chunks):
            flags = FLAG_FIN if fin and index == len(chunks) - 1 else 0
            frames.append(struct.pack(">II", stream_id & 0x7FFFFFFF, (flags << 24) | len(chunk)) + chunk)
        return b"".join(frames)

    def _header_block(self, headers: dict[str, str]) -> bytes:
        block = struct.pack(">I", len(headers))
        for name, value in headers.items():
            block += struct.pack(">I", len(name)) + name.lower().encode()
            block += struct.pack(">I", len(value.encode())) + value.encode()
        return self._deflate.compress(block) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    def syn_stream(self, stream_id: int, headers: dict[str, str], fin: bool = False) -> bytes:
        """What a client sends to open a stream (the simulator never does; its tests do)."""
        payload = struct.pack(">IIH", stream_id, 0, 0) + self._header_block(headers)
        return self._control(SYN_STREAM, FLAG_FIN if fin else 0, payload)

    def syn_reply(self, stream_id: int, headers: dict[str, str] | None = None, fin: bool = False) -> bytes:
        payload = struct.pack(">I", stream_id) + self._header_block(headers or {})
        return self._control(SYN_REPLY, FLAG_FIN if fin else 0, payload)

    def rst_stream(self, stream_id: int, status: int) -> bytes:
        return self._control(RST_STREAM, 0, struct.pack(">II", stream_id, status))

    def ping(self, ping_id: int) -> bytes:
        return self._control(PING, 0, struct.pack(">I", ping_id))

    def goaway(self, last_stream_id: int, status: int = 0) -> bytes:
        return self._control(GOAWAY, 0, struct.pack(">II", last_stream_id, status))
