"""What pods/exec, pods/attach and pods/portforward share: the WebSocket upgrade and its sub-protocol choice.

Kubernetes streams over WebSocket with one channel byte in front of every binary message (`*.channel.k8s.io`), or,
for kubectl port-forward, a SPDY/3.1 byte stream carried in binary messages (`SPDY/3.1+portforward.k8s.io`). The
simulator serves the WebSocket forms only; a client that asks for the plain SPDY/3.1 upgrade gets a Status saying so.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from . import apierror

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
        raise apierror.bad_request(f"pods/{subresource} is served over WebSocket (sub-protocols "
                                          f"{', '.join(protocols)}); the simulated cluster does not support "
                                          f"{asked} (the SPDY/3.1 upgrade of older clients)")
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
