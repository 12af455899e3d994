"""What pods/exec, pods/attach and pods/portforward share: the upgrades and their protocol choice.

Kubernetes streams over WebSocket with one channel byte in front of every binary message (`*.channel.k8s.io`), or,
for kubectl port-forward 1.31+, a SPDY/3.1 byte stream carried in binary messages (`SPDY/3.1+portforward.k8s.io`);
older clients (and kubectl with KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false / KUBECTL_PORT_FORWARD_WEBSOCKETS=false)
upgrade the HTTP/1.1 connection itself to SPDY/3.1 (`Upgrade: SPDY/3.1`, `X-Stream-Protocol-Version`).
`ByteStream` hides which of the two carries a SPDY connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from aiohttp import WSMsgType, web

from pytest_topsail.sim.machinery import apierror

# The kubelet's default streaming idle timeout: a stream with no message for this long is closed.
STREAM_IDLE_TIMEOUT = 4 * 3600.0
MAX_MESSAGE = 64 * 1024 * 1024
_TRUE = {"1", "t", "T", "true", "TRUE", "True"}  # what Go's strconv.ParseBool takes as true


def query_flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "") in _TRUE


async def accept(request: web.Request, protocols: Sequence[str], subresource: str) -> web.WebSocketResponse:
    """Upgrade to a WebSocket speaking the first of the client's sub-protocols that is in `protocols` (none offered:
    the first of `protocols`); a request that is not a WebSocket upgrade gets a 400 Status naming what is served."""
    if request.headers.get("Upgrade", "").lower() != "websocket":
        asked = request.headers.get("Upgrade") or "no upgrade"
        raise apierror.bad_request(f"pods/{subresource} needs a WebSocket (sub-protocols {', '.join(protocols)}) "
                                   f"or SPDY/3.1 upgrade, got {asked}")
    offered = request.headers.get("Sec-WebSocket-Protocol")
    socket = web.WebSocketResponse(protocols=protocols, compress=False, max_msg_size=MAX_MESSAGE,
                                   receive_timeout=STREAM_IDLE_TIMEOUT, autoping=True)
    ready = socket.can_prepare(request)
    if offered and not ready.protocol:
        raise apierror.bad_request(f"pods/{subresource}: none of the WebSocket sub-protocols {offered} is "
                                          f"supported; supported: {', '.join(protocols)}")
    await socket.prepare(request)
    return socket


def protocol_of(socket: web.WebSocketResponse, protocols: Sequence[str]) -> str:
    return socket.ws_protocol or protocols[0]


# ----------------------------------------------------------------- SPDY/3.1 byte streams
class ByteStream(Protocol):
    async def receive(self) -> bytes:
        """The next bytes from the client; b"" once it is gone."""

    async def send(self, data: bytes) -> None: ...


class WebSocketBytes:
    """The byte stream carried by a WebSocket's binary messages (kubectl's SPDY tunnel)."""

    def __init__(self, socket: web.WebSocketResponse) -> None:
        self.socket = socket

    async def receive(self) -> bytes:
        while True:
            message = await self.socket.receive()
            if message.type == WSMsgType.BINARY and message.data:  # kubectl also sends empty messages
                return bytes(message.data)
            if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return b""

    async def send(self, data: bytes) -> None:
        if not self.socket.closed:
            await self.socket.send_bytes(data)


def is_spdy_upgrade(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower().startswith("spdy/3.1")


class _RawReader:
    """Takes the place of aiohttp's payload parser after the upgrade: every byte received goes to the queue."""

    def __init__(self, queue: asyncio.Queue[bytes]) -> None:
        self.queue = queue

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.queue.put_nowait(bytes(data))
        return False, b""

    def feed_eof(self) -> None:
        self.queue.put_nowait(b"")


class UpgradedBytes:
    """The HTTP/1.1 connection itself after `101 Switching Protocols` to SPDY/3.1."""

    def __init__(self, response: web.StreamResponse, incoming: asyncio.Queue[bytes]) -> None:
        self.response = response
        self.incoming = incoming
        self.ended = False

    async def receive(self) -> bytes:
        if self.ended:
            return b""
        try:
            data = await asyncio.wait_for(self.incoming.get(), STREAM_IDLE_TIMEOUT)
        except TimeoutError:
            data = b""
        self.ended = not data
        return data

    async def send(self, data: bytes) -> None:
        try:
            await self.response.write(data)
        except (ConnectionError, RuntimeError):
            self.ended = True


async def upgrade_spdy(request: web.Request, versions: Sequence[str], subresource: str) -> tuple[UpgradedBytes, str]:
    """Answer 101 to SPDY/3.1 with the first protocol version the client offers that is in `versions`."""
    offered = [v.strip() for header in request.headers.getall("X-Stream-Protocol-Version", [])
               for v in header.split(",") if v.strip()]
    chosen = next((v for v in offered if v in versions), None)
    if chosen is None:
        raise apierror.bad_request(f"pods/{subresource}: unable to upgrade: unable to negotiate protocol: client "
                                   f"supports {offered}, server supports {list(versions)}")
    response = web.StreamResponse(status=101, headers={"Connection": "Upgrade", "Upgrade": "SPDY/3.1",
                                                       "X-Stream-Protocol-Version": chosen})
    await response.prepare(request)
    incoming: asyncio.Queue[bytes] = asyncio.Queue()
    handler = request.protocol
    handler.keep_alive(False)  # the connection ends with the stream
    handler.set_parser(_RawReader(incoming))  # type: ignore[arg-type]
    return UpgradedBytes(response, incoming), chosen
