"""pods/portforward over WebSocket: where a simulated pod's port leads, and the two framings clients speak.

A pod serves container port N when its annotation `sim.topsail.io/endpoint-N` holds a loopback `host:port` (the
TGIS/KServe controller writes it for the model server it starts); connecting to that address directly skips the
tunnel. Any other port has no listener: the forward fails with the kubelet's connection-refused message on the error
channel.

- `v4.channel.k8s.io` (the official client's `kubernetes.stream.portforward`): the `ports` of the request get a
  data channel 2i and an error channel 2i+1, each opened by a frame holding the port (2 bytes, little endian); the
  WebSocket closes when every port's connection has ended.
- `SPDY/3.1+portforward.k8s.io` (kubectl port-forward 1.31+): a SPDY/3.1 connection inside the WebSocket, or
  (older kubectl) on the connection upgraded to SPDY/3.1 (`portforward.k8s.io`); each local
  connection opens an error stream and a data stream with the same `requestID` header; FIN on the data stream
  half-closes the target connection; the simulator FINs both streams when the target connection ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from pytest_topsail.sim.controllers.containers import ENDPOINT_ANNOTATION
from pytest_topsail.sim.machinery import apierror
from pytest_topsail.sim.streams import spdy, streaming

logger = logging.getLogger(__name__)

SPDY_TUNNEL = "SPDY/3.1+portforward.k8s.io"
PROTOCOLS = (SPDY_TUNNEL, "v4.channel.k8s.io", "portforward.k8s.io")
CONNECT_TIMEOUT = 10.0
CHUNK = 256 * 1024


class ForwardError(Exception):
    """The message the error channel or stream carries."""


def endpoint(pod: dict[str, Any], port: int) -> tuple[str, int] | None:
    """The loopback address serving the pod's `port`, from its annotation; None when nothing listens there."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(f"{ENDPOINT_ANNOTATION}{port}")
    if not value:
        return None
    host, _, number = str(value).strip().rpartition(":")
    host = host.strip("[]")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        target = int(number)
    except ValueError:
        return None
    return (host, target) if loopback and 0 < target < 65536 else None


async def connect(pod: dict[str, Any], port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    metadata = pod["metadata"]
    prefix = (f"error forwarding port {port} to pod {metadata.get('namespace')}/{metadata['name']}, uid "
              f"{metadata.get('uid')}: failed to connect to localhost:{port} inside namespace "
              f"\"{metadata.get('uid')}\"")
    address = endpoint(pod, port)
    if address is None:
        raise ForwardError(f"{prefix}, IPv4: dial tcp4 127.0.0.1:{port}: connect: connection refused")
    try:
        return await asyncio.wait_for(asyncio.open_connection(*address), CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as error:
        reason = "connection refused" if isinstance(error, ConnectionRefusedError) else str(error) or "timeout"
        raise ForwardError(f"{prefix}, IPv4: dial tcp4 {address[0]}:{address[1]}: connect: {reason}") from None


def requested_ports(request: web.Request) -> list[int]:
    ports = []
    for value in request.query.getall("ports", []):
        for text in value.split(","):
            try:
                port = int(text)
            except ValueError:
                raise apierror.bad_request(f"invalid port {text!r}: must be a number") from None
            if not 0 < port < 65536:
                raise apierror.bad_request(f"invalid port {port}: must be between 1 and 65535")
            ports.append(port)
    return ports


async def serve(request: web.Request, pod: dict[str, Any]) -> web.StreamResponse:
    if not (pod.get("spec") or {}).get("nodeName"):
        raise apierror.bad_request(f"pod {pod['metadata']['name']} does not have a host assigned")
    if streaming.is_spdy_upgrade(request):
        stream, _ = await streaming.upgrade_spdy(request, ("portforward.k8s.io",), "portforward")
        await _SpdyTunnel(stream, pod).run()
        return stream.response
    ports = requested_ports(request)
    offered = request.headers.get("Sec-WebSocket-Protocol") or ""
    if SPDY_TUNNEL not in offered and not ports:
        raise apierror.bad_request("query parameter \"ports\" is required")
    socket = await streaming.accept(request, PROTOCOLS, "portforward")
    try:
        if socket.ws_protocol == SPDY_TUNNEL:
            await _SpdyTunnel(streaming.WebSocketBytes(socket), pod).run()
        else:
            await _forward_channels(socket, pod, ports)
    finally:
        await socket.close()
    return socket


# ----------------------------------------------------------------- v4.channel.k8s.io
async def _forward_channels(socket: web.WebSocketResponse, pod: dict[str, Any], ports: list[int]) -> None:
    for index, port in enumerate(ports):
        prefix = port.to_bytes(2, "little")
        await socket.send_bytes(bytes([2 * index]) + prefix)
        await socket.send_bytes(bytes([2 * index + 1]) + prefix)
    writers: dict[int, asyncio.Future[asyncio.StreamWriter | None]] = {}
    loop = asyncio.get_running_loop()
    for index in range(len(ports)):
        writers[2 * index] = loop.create_future()
    pumps = [loop.create_task(_pump_port(socket, pod, port, 2 * index, writers[2 * index]))
             for index, port in enumerate(ports)]
    reader = loop.create_task(_read_channels(socket, writers))
    all_pumps: asyncio.Future[Any] = asyncio.gather(*pumps, return_exceptions=True)
    try:
        await asyncio.wait([reader, all_pumps], return_when=asyncio.FIRST_COMPLETED)
    finally:
        reader.cancel()
        all_pumps.cancel()
        await asyncio.gather(reader, all_pumps, return_exceptions=True)
        for future in writers.values():
            if future.done() and future.result() is not None:
                future.result().close()  # type: ignore[union-attr]


async def _pump_port(socket: web.WebSocketResponse, pod: dict[str, Any], port: int, channel: int,
                     writer_future: asyncio.Future[asyncio.StreamWriter | None]) -> None:
    """Connect the port's target and copy what it sends to the data channel until it closes."""
    try:
        reader, writer = await connect(pod, port)
    except ForwardError as error:
        writer_future.set_result(None)
        await socket.send_bytes(bytes([channel + 1]) + str(error).encode())
        return
    writer_future.set_result(writer)
    while data := await reader.read(CHUNK):
        await socket.send_bytes(bytes([channel]) + data)


async def _read_channels(socket: web.WebSocketResponse,
                         writers: dict[int, asyncio.Future[asyncio.StreamWriter | None]]) -> None:
    async for message in socket:
        if message.type != WSMsgType.BINARY or not message.data:
            if message.type in (WSMsgType.CLOSE, WSMsgType.ERROR):
                return
            continue
        future = writers.get(message.data[0])
        if future is None:
            continue  # error channels and unknown ones carry nothing the target needs
        writer = await future
        if writer is not None and not writer.is_closing():
            writer.write(message.data[1:])
            with contextlib.suppress(ConnectionError):
                await writer.drain()


# ----------------------------------------------------------------- SPDY/3.1 (WebSocket tunnel or upgraded connection)
@dataclass
class _Stream:
    stream_id: int
    headers: dict[str, str]
    incoming: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)  # None: the client's FIN


@dataclass
class _Pair:
    error: _Stream | None = None
    data: _Stream | None = None
    task: asyncio.Task[None] | None = None


class _SpdyTunnel:
    """Port-forward streams of one SPDY/3.1 connection (inside a WebSocket or on the upgraded connection)."""

    def __init__(self, stream: streaming.ByteStream, pod: dict[str, Any]) -> None:
        self.stream = stream
        self.pod = pod
        self.codec = spdy.Codec()
        self.streams: dict[int, _Stream] = {}
        self.pairs: dict[str, _Pair] = {}
        self.send_lock = asyncio.Lock()

    async def run(self) -> None:
        try:
            while data := await self.stream.receive():
                for frame in self.codec.feed(data):
                    if frame.kind == spdy.GOAWAY:
                        return
                    await self._handle(frame)
        except spdy.SpdyError as error:
            logger.warning("port-forward to %s: %s", self.pod["metadata"]["name"], error)
        finally:
            tasks = [pair.task for pair in self.pairs.values() if pair.task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _send(self, data: bytes) -> None:
        async with self.send_lock:
            await self.stream.send(data)

    async def _handle(self, frame: spdy.Frame) -> None:
        if frame.kind == spdy.SYN_STREAM:
            await self._open(frame)
        elif frame.kind == spdy.DATA:
            stream = self.streams.get(frame.stream_id)
            if stream is None:
                return
            if frame.data:
                stream.incoming.put_nowait(frame.data)
            if frame.fin:
                stream.incoming.put_nowait(None)
        elif frame.kind == spdy.RST_STREAM:
            stream = self.streams.pop(frame.stream_id, None)
            pair = self.pairs.get(stream.headers.get("requestid", "") if stream else "")
            if pair is not None and pair.task is not None:
                pair.task.cancel()
        elif frame.kind == spdy.PING:
            await self._send(self.codec.ping(frame.value))

    async def _open(self, frame: spdy.Frame) -> None:
        stream = _Stream(frame.stream_id, frame.headers)
        self.streams[frame.stream_id] = stream
        if frame.fin:
            stream.incoming.put_nowait(None)
        async with self.send_lock:  # header blocks share one compression context: encode and send in order
            await self.stream.send(self.codec.syn_reply(frame.stream_id))
        kind, request_id = frame.headers.get("streamtype"), frame.headers.get("requestid", "")
        if kind not in ("error", "data"):
            await self._send(self.codec.rst_stream(frame.stream_id, spdy.RST_PROTOCOL_ERROR))
            return
        pair = self.pairs.setdefault(request_id, _Pair())
        setattr(pair, kind, stream)
        if pair.error is not None and pair.data is not None and pair.task is None:
            pair.task = asyncio.get_running_loop().create_task(self._forward(request_id, pair.error, pair.data))

    async def _forward(self, request_id: str, error: _Stream, data: _Stream) -> None:
        try:
            port = int(data.headers.get("port", ""))
        except ValueError:
            port = 0
        writer: asyncio.StreamWriter | None = None
        upload: asyncio.Task[None] | None = None
        try:
            reader, writer = await connect(self.pod, port)
            upload = asyncio.get_running_loop().create_task(_upload(data, writer))
            while chunk := await reader.read(CHUNK):
                await self._send(self.codec.data(data.stream_id, chunk))
            await self._send(self.codec.data(data.stream_id, fin=True))
            await self._send(self.codec.data(error.stream_id, fin=True))
        except ForwardError as failure:
            await self._send(self.codec.data(error.stream_id, str(failure).encode(), fin=True))
            await self._send(self.codec.data(data.stream_id, fin=True))
        except ConnectionError:
            pass
        finally:
            if upload is not None:
                upload.cancel()
            if writer is not None:
                writer.close()
            self.pairs.pop(request_id, None)
            self.streams.pop(error.stream_id, None)
            self.streams.pop(data.stream_id, None)


async def _upload(stream: _Stream, writer: asyncio.StreamWriter) -> None:
    """Copy the client's data stream to the target; its FIN half-closes the target connection."""
    while (chunk := await stream.incoming.get()) is not None:
        writer.write(chunk)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()
