"""An asyncio client of the TGIS `fmaas.GenerationService`: Generate, GenerateStream, Tokenize, ModelInfo.

One client holds one gRPC channel for its whole life, so many calls and streams multiplex over one HTTP/2
connection. Every call has a deadline. While a server starts, UNAVAILABLE is retried a bounded number of times with
exponential backoff (a stream only until its first message). The model id travels in the request and in the
`mm-model-id` metadata, as model-mesh routes on it. Parameters are given as `generation_pb2.Parameters` or as a dict
in the protobuf JSON form (camelCase or snake_case, e.g. tgis-tester's case files).

`time_compressed_s` sums what a simulated server on a serving time scale below 1 took off this client's calls (its
trailing metadata, pytest_topsail.tgis.serving): a call's wall time plus its share is its latency in simulated
time. Always 0 against a real server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterable, Mapping
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from pytest_topsail.errors import TopsailError
from pytest_topsail.tgis import generation_pb2 as pb
from pytest_topsail.tgis.generation_pb2_grpc import GenerationServiceStub

COMPRESSED_METADATA = "x-topsail-time-compressed-ms"  # trailing metadata of a simulated server, see above
ParamsLike = pb.Parameters | Mapping[str, Any] | None


def to_parameters(params: ParamsLike) -> pb.Parameters:
    """`params` as a Parameters message; a dict is read as protobuf JSON (unknown keys are an error naming them)."""
    if params is None:
        return pb.Parameters()
    if isinstance(params, pb.Parameters):
        return params
    try:
        return json_format.ParseDict(dict(params), pb.Parameters())
    except json_format.ParseError as error:
        raise TopsailError(f"invalid TGIS parameters {dict(params)!r}: {error}") from None


class TgisClient:
    """Client of one TGIS server. Use as `async with TgisClient("host:port", model_id=...) as client:`."""

    def __init__(self, target: str, *, model_id: str = "", ca_file: str | Path | None = None,
                 timeout: float = 60.0, retries: int = 8, backoff: float = 0.05,
                 server_name: str | None = None) -> None:
        self.target = target
        self.model_id = model_id
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._metadata = (("mm-model-id", model_id),) if model_id else ()
        self._channel = open_channel(target, ca_file, server_name)
        self._stub = GenerationServiceStub(self._channel)
        self.time_compressed_s = 0.0

    async def __aenter__(self) -> TgisClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def generate(self, texts: Iterable[str], params: ParamsLike = None, *, prefix_id: str | None = None,
                       adapter_id: str | None = None, timeout: float | None = None) -> pb.BatchedGenerationResponse:
        texts = [texts] if isinstance(texts, str) else texts  # one prompt, not its characters
        request = pb.BatchedGenerationRequest(
            model_id=self.model_id, requests=[pb.GenerationRequest(text=text) for text in texts],
            params=to_parameters(params), prefix_id=prefix_id, adapter_id=adapter_id)
        return await self._unary(self._stub.Generate, request, timeout)

    async def generate_stream(self, text: str, params: ParamsLike = None, *, prefix_id: str | None = None,
                              adapter_id: str | None = None,
                              timeout: float | None = None) -> AsyncGenerator[pb.GenerationResponse, None]:
        """The stream's messages as they arrive; cancelled when the caller stops iterating."""
        request = pb.SingleGenerationRequest(
            model_id=self.model_id, request=pb.GenerationRequest(text=text), params=to_parameters(params),
            prefix_id=prefix_id, adapter_id=adapter_id)
        for attempt in range(self.retries + 1):
            call = self._stub.GenerateStream(request, timeout=timeout or self.timeout, metadata=self._metadata)
            received = False
            try:
                async for message in call:
                    received = True
                    yield message
                self._count_compressed(await call.trailing_metadata())
                return
            except grpc.aio.AioRpcError as error:
                if received or not self._should_retry(error, attempt):
                    raise
            finally:
                call.cancel()
            await asyncio.sleep(self._delay(attempt))

    async def tokenize(self, texts: Iterable[str], *, return_tokens: bool = False, return_offsets: bool = False,
                       truncate_input_tokens: int = 0, timeout: float | None = None) -> pb.BatchedTokenizeResponse:
        texts = [texts] if isinstance(texts, str) else texts
        request = pb.BatchedTokenizeRequest(
            model_id=self.model_id, requests=[pb.TokenizeRequest(text=text) for text in texts],
            return_tokens=return_tokens, return_offsets=return_offsets, truncate_input_tokens=truncate_input_tokens)
        return await self._unary(self._stub.Tokenize, request, timeout)

    async def model_info(self, *, timeout: float | None = None) -> pb.ModelInfoResponse:
        return await self._unary(self._stub.ModelInfo, pb.ModelInfoRequest(model_id=self.model_id), timeout)

    async def _unary(self, method: Any, request: Any, timeout: float | None) -> Any:
        for attempt in range(self.retries + 1):
            try:
                call = method(request, timeout=timeout or self.timeout, metadata=self._metadata)
                response = await call
                self._count_compressed(await call.trailing_metadata())
                return response
            except grpc.aio.AioRpcError as error:
                if not self._should_retry(error, attempt):
                    raise
            await asyncio.sleep(self._delay(attempt))
        raise AssertionError("unreachable: the last attempt raises")

    def _count_compressed(self, trailers: Any) -> None:
        for key, value in trailers or ():
            if key == COMPRESSED_METADATA:
                self.time_compressed_s += float(value) / 1000

    def _should_retry(self, error: grpc.aio.AioRpcError, attempt: int) -> bool:
        return error.code() == grpc.StatusCode.UNAVAILABLE and attempt < self.retries

    def _delay(self, attempt: int) -> float:
        return min(self.backoff * 2**attempt, 2.0)


def open_channel(target: str, ca_file: str | Path | None = None, server_name: str | None = None, *,
                 sync: bool = False) -> Any:
    """A grpc.aio channel, or with ``sync`` a grpc one whose unary-stream calls are read in the caller's thread."""
    options: list[tuple[str, Any]] = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
    if sync:
        from grpc.experimental import ChannelOptions

        options.append((ChannelOptions.SingleThreadedUnaryStream, 1))
    module: Any = grpc if sync else grpc.aio
    if ca_file is None:
        return module.insecure_channel(target, options=options)
    try:
        root_certificates = Path(ca_file).read_bytes()
    except OSError as error:
        raise TopsailError(f"TGIS client: cannot read the CA file {ca_file}: {error.strerror}") from None
    if server_name:
        options.append(("grpc.ssl_target_name_override", server_name))
    credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
    return module.secure_channel(target, credentials, options=options)
