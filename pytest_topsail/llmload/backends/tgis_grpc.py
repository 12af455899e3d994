"""TGIS gRPC backend (``fmaas.GenerationService``): GenerateStream or Generate over one HTTP/2 connection
multiplexing every request of the load test (llm-load-test opens one per request).

Output lengths are pinned with ``min_new_tokens = max_new_tokens`` = the dataset's output length, greedy decoding.
A streamed message carries ``generated_token_count`` (cumulative): its increase is the chunk's token count.
Retries are off: a load test counts an UNAVAILABLE answer as a failure instead of hiding it. The one exception is
grpc's transparent retry: a stream the server refused unprocessed (REFUSED_STREAM) is sent again (grpc_h2).

Calls go through ``grpc_h2`` (gRPC over HTTP/2 on the event loop, HTTP/2 by the ``h2`` library, not the grpc
library in the request path): grpc's Python APIs cost
several times more client CPU per call (a call object, a completion queue, and a thread hand-off or an event-loop
wake-up per message), which made the client the bottleneck (benchmarks/llm_load.py). Each request's message is
encoded once per prompt and output length; each answer message is read and timed in the protocol's
``data_received`` as its bytes arrive, and the request's task is woken once, at the end of its stream.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.llmload.backends import BackendError
from pytest_topsail.llmload.backends.grpc_h2 import Connection, GrpcError, grpc_message
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.records import RequestRecord

SERVICE = b"/fmaas.GenerationService/"
USER_AGENT = b"pytest-topsail-llmload"


@dataclass
class TgisBackend:
    target: str
    model: str = ""
    stream: bool = True
    call_timeout_s: float = 3600.0  # the load point's timeout_s bounds each request; this only backs it up
    ca_file: str | None = None  # TLS: the CA bundle (PEM) the server's certificate is checked against
    server_name: str | None = None  # TLS: the name its certificate must hold, when not the target's host
    name: str = "tgis"
    client: Any = field(default=None, init=False, repr=False)  # the HTTP/2 connection (grpc_h2.Connection)
    headers: list[tuple[bytes, bytes]] = field(default_factory=list, init=False, repr=False)  # built once

    async def open(self) -> None:
        from pytest_topsail.tgis import generation_pb2 as pb  # protobuf loads only for gRPC load tests

        self.pb = pb
        self.host, self.port = split_target(self.target)
        self.ssl = tls_context(self.ca_file) if self.ca_file is not None else None
        metadata = [(b"mm-model-id", self.model.encode())] if self.model else []
        authority = self.server_name or (f"[{self.host}]" if ":" in self.host else self.host) + f":{self.port}"
        self.path = SERVICE + (b"GenerateStream" if self.stream else b"Generate")
        self.headers = [(b":scheme", b"https" if self.ssl else b"http"), (b":authority", authority.encode()),
                        (b"content-type", b"application/grpc"), (b"te", b"trailers"), (b"user-agent", USER_AGENT),
                        (b"grpc-timeout", f"{min(max(1, round(self.call_timeout_s)), 99_999_999)}S".encode()),
                        *metadata]
        self.bodies: dict[tuple[str, int], bytes] = {}
        self.dialing: asyncio.Future[Connection] | None = None
        self.client = None

    async def close(self) -> None:
        if self.client is not None:
            self.client.close()  # fails every call still running
        self.client = None

    def parameters(self, output_tokens: int) -> Any:
        """Greedy decoding of exactly ``output_tokens`` tokens."""
        stopping = self.pb.StoppingCriteria(max_new_tokens=output_tokens, min_new_tokens=output_tokens)
        return self.pb.Parameters(method=self.pb.GREEDY, stopping=stopping)

    def body(self, text: str, output_tokens: int) -> bytes:
        """The request message, framed (encoded once per prompt text and output length)."""
        body = self.bodies.get((text, output_tokens))
        if body is None:
            pb = self.pb
            if self.stream:
                message = pb.SingleGenerationRequest(model_id=self.model, request=pb.GenerationRequest(text=text),
                                                     params=self.parameters(output_tokens))
            else:
                message = pb.BatchedGenerationRequest(model_id=self.model, requests=[pb.GenerationRequest(text=text)],
                                                      params=self.parameters(output_tokens))
            body = self.bodies[(text, output_tokens)] = grpc_message(message.SerializeToString())
        return body

    async def connection(self) -> Connection:
        """The connection, opened when there is none (or it takes no new stream); callers arriving meanwhile wait
        for the same one."""
        if self.client is not None and self.client.usable:
            return self.client
        if self.dialing is None:
            self.dialing = asyncio.ensure_future(self.dial())
            self.dialing.add_done_callback(lambda done: done.cancelled() or done.exception())
        dialing = self.dialing
        try:
            return await asyncio.shield(dialing)
        finally:
            if self.dialing is dialing and dialing.done():
                self.dialing = None

    async def dial(self) -> Connection:
        try:
            _, connection = await asyncio.get_running_loop().create_connection(
                Connection, self.host, self.port, ssl=self.ssl,
                server_hostname=(self.server_name or self.host) if self.ssl else None)
        except (OSError, ssl.SSLError) as error:
            raise GrpcError("UNAVAILABLE", f"cannot connect to {self.target}: {error}") from None
        if connection.ready is not None:
            await connection.ready  # raises GrpcError when the connection ends first
        if self.ssl is not None:
            ssl_object = connection.transport.get_extra_info("ssl_object") if connection.transport else None
            if ssl_object is None or ssl_object.selected_alpn_protocol() != "h2":
                connection.close()
                raise GrpcError("UNAVAILABLE", f"{self.target} did not agree to HTTP/2 (ALPN)")
        self.client = connection
        return connection

    async def send(self, prompt: Prompt, record: RequestRecord) -> None:
        if not self.headers:
            raise RuntimeError("TgisBackend.send before open()")
        text = prompt.full_text()
        try:
            connection = await self.connection()
            if self.stream:
                reader = StreamReader(record, self.pb.GenerationResponse.FromString)
                record.end = await connection.call(self.path, self.headers,
                                                   self.body(text, prompt.output_tokens), reader)
                record.output_tokens = reader.generated
            else:
                answers: list[bytes] = []

                def answer(data: bytes) -> None:
                    record.acked()
                    answers.append(data)

                await connection.call(self.path, self.headers, self.body(text, prompt.output_tokens), answer)
                if not answers:
                    raise GrpcError("INTERNAL", "the answer carried no message")
                response = self.pb.BatchedGenerationResponse.FromString(answers[0]).responses[0]
                record.input_tokens = response.input_token_count
                record.output_tokens = response.generated_token_count
        except GrpcError as error:
            raise BackendError(error.code, error.details) from None


class StreamReader:
    """Reads a stream's messages as their bytes are read (in the connection's ``data_received``)."""

    __slots__ = ("record", "parse", "generated")

    def __init__(self, record: RequestRecord, parse: Any) -> None:
        self.record, self.parse, self.generated = record, parse, 0

    def __call__(self, data: bytes) -> None:
        message = self.parse(data)
        record = self.record
        record.acked()
        if message.input_token_count:
            record.input_tokens = message.input_token_count
        if message.generated_token_count > self.generated:
            record.tokens(message.generated_token_count - self.generated)
            self.generated = message.generated_token_count


def split_target(target: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``; an optional ``dns:///`` prefix) as host and port."""
    address = target.removeprefix("dns:///").removeprefix("ipv4:").removeprefix("ipv6:")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise TopsailError(f"TGIS backend: the target {target!r} is not host:port")
    return host.strip("[]"), int(port)


def tls_context(ca_file: str) -> ssl.SSLContext:
    """Server certificates checked against the CA bundle; HTTP/2 asked for by ALPN."""
    try:
        context = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as error:
        raise TopsailError(f"TGIS client: cannot read the CA file {ca_file}: {error}") from None
    context.set_alpn_protocols(["h2"])
    return context
