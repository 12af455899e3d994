"""The reference TGIS server: `fmaas.GenerationService` over grpc.aio, with grpc.health.v1 and reflection.

In-process (tests, the simulator's predictor pods):
    running = await start_server(ServerSettings(model_name="bigscience/bloom-560m", config=ModelConfig()))
    ... running.port ...; await running.stop()
or from synchronous code, on its own event loop in a thread:
    with ServerThread(ServerSettings(...)) as running: ...
As a child process:
    python -m pytest_topsail.tgis.server --model NAME [--config-json JSON] [--gpu-profile a100] [--port 8033]
        [--http-port PORT] [--zero-latency] [--diverge] [--prefix ID=TEXT ...] [--tls-cert-path P --tls-key-path P]
which prints `TGIS reference server listening on HOST:PORT` once it serves (after `OpenAI-compatible HTTP listening
on HOST:PORT` with --http-port) (port 0 picks a free one) and stops on SIGTERM/SIGINT.
Environment (also read from a simulated pod's env by the simulator, see `environment_settings`):
TOPSAIL_TGIS_DIVERGE=1 is --diverge; TOPSAIL_TGIS_PREFIXES='{"id": "text"}' adds known prefix ids;
TOPSAIL_TGIS_ITL_FACTOR=1.5 multiplies the inter-token latency (a slower decode, same prefill: load-test regressions).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from pytest_topsail.errors import TopsailError
from pytest_topsail.tgis import generation_pb2 as pb
from pytest_topsail.tgis import generation_pb2_grpc as pb_grpc
from pytest_topsail.tgis.catalog import ServedModel
from pytest_topsail.tgis.client import COMPRESSED_METADATA
from pytest_topsail.tgis.model_config import ModelConfig, load_model_config
from pytest_topsail.tgis.serving import ModelServer, Overloaded, PreparedInput, ServedTime
from pytest_topsail.tgis.toymodel import DecodingSettings, Generation, TokenDetail
from pytest_topsail.tgis.validation import InvalidRequest, ResponseFlags, check_parameters

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["GenerationService"].full_name
DIVERGE_ENV = "TOPSAIL_TGIS_DIVERGE"
PREFIXES_ENV = "TOPSAIL_TGIS_PREFIXES"
ITL_FACTOR_ENV = "TOPSAIL_TGIS_ITL_FACTOR"


@dataclass(frozen=True)
class ServerSettings:
    model_name: str
    config: ModelConfig = field(default_factory=ModelConfig)
    gpu_profile: str = "a100"
    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port
    zero_latency: bool = False
    itl_factor: float = 1.0  # multiplies the latency model's inter-token latency (prefill unchanged)
    time_scale: float = 1.0  # real seconds per simulated second of serving (serving.py)
    diverge: bool = False  # this server's text differs from every other config's (see toymodel)
    prefixes: dict[str, str] = field(default_factory=dict)  # prefix/adapter id -> prompt prefix text
    http_port: int | None = None  # also serve the OpenAI-compatible HTTP front (openai_http.py); 0: a free port
    tls_cert_pem: bytes | None = None  # with tls_key_pem: gRPC over TLS (TGIS's --tls-cert-path/--tls-key-path)
    tls_key_pem: bytes | None = None
    served: ServedModel | None = None  # the model's size (a suite's declared model); None: the catalog's, by name


class GenerationServicer(pb_grpc.GenerationServiceServicer):
    def __init__(self, backend: ModelServer) -> None:
        self.backend = backend

    async def Generate(self, request: pb.BatchedGenerationRequest,  # noqa: N802 (gRPC method name)
                       context: grpc.aio.ServicerContext) -> pb.BatchedGenerationResponse:
        if not request.requests:
            return pb.BatchedGenerationResponse()
        try:
            with self.backend.admitted(len(request.requests)):
                settings, flags, time_limit = check_parameters(request.params, self.backend.limits)
                prefix = self.backend.prefix_tokens(_prefix_id(request))
                prepared = [self.backend.prepare(r.text, request.params.truncate_input_tokens, prefix)
                            for r in request.requests]
                fitted = [self.backend.fit(settings, p) for p in prepared]
                served = [ServedTime() for _ in prepared]
                if len(prepared) == 1:  # the common case, without a task per request
                    generations = [await self.backend.complete(prepared[0], fitted[0], time_limit, served[0])]
                else:
                    generations = await asyncio.gather(*(
                        self.backend.complete(p, s, time_limit, t) for p, s, t in zip(prepared, fitted, served,
                                                                                     strict=True)))
                self._report_compressed(context, max(t.compressed_s for t in served))
        except InvalidRequest as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        except Overloaded as error:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(error))
        return pb.BatchedGenerationResponse(responses=[
            self._final_response(p, s, g, flags) for p, s, g in zip(prepared, fitted, generations, strict=True)])

    async def GenerateStream(self, request: pb.SingleGenerationRequest,  # noqa: N802
                             context: grpc.aio.ServicerContext) -> AsyncIterator[pb.GenerationResponse]:
        try:
            with self.backend.admitted():
                if not request.HasField("request"):
                    raise InvalidRequest("missing request")
                settings, flags, time_limit = check_parameters(request.params, self.backend.limits)
                prefix = self.backend.prefix_tokens(_prefix_id(request))
                prepared = self.backend.prepare(request.request.text, request.params.truncate_input_tokens, prefix)
                settings = self.backend.fit(settings, prepared)
                # first the input token count (and input text), then the input tokens alone, as TGIS streams
                yield pb.GenerationResponse(input_token_count=len(prepared.tokens), seed=settings.seed,
                                            text=prepared.text if flags.input_text else "")
                if flags.input_tokens:
                    yield pb.GenerationResponse(input_tokens=self._input_infos(prepared, flags, settings))
                served = ServedTime()
                steps = self.backend.generate(prepared, settings, time_limit, served)
                async with contextlib.aclosing(steps):  # a cancelled stream frees its batch slot at once
                    async for generation, step in steps:
                        tokens = [_token_info(step.token, flags)] if flags.generated_tokens else []
                        if not (step.text or tokens or generation.finished):
                            continue
                        yield pb.GenerationResponse(
                            generated_token_count=len(generation.tokens), text=step.text, tokens=tokens,
                            stop_reason=step.stop_reason.name, stop_sequence=generation.stop_sequence,
                            seed=settings.seed if generation.finished else 0)
                self._report_compressed(context, served.compressed_s)
        except InvalidRequest as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        except Overloaded as error:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(error))

    def _report_compressed(self, context: grpc.aio.ServicerContext, compressed_s: float) -> None:
        """On a time scale below 1: the call's simulated time its client did not wait, for the latency it reports."""
        if self.backend.time_scale < 1:
            context.set_trailing_metadata(((COMPRESSED_METADATA, f"{compressed_s * 1000:.3f}"),))

    async def Tokenize(self, request: pb.BatchedTokenizeRequest,  # noqa: N802
                       context: grpc.aio.ServicerContext) -> pb.BatchedTokenizeResponse:
        responses = []
        for item in request.requests:
            pieces = self.backend.tokenize(item.text, request.truncate_input_tokens)
            responses.append(pb.TokenizeResponse(
                token_count=len(pieces),
                tokens=[p.text for p in pieces] if request.return_tokens else [],
                offsets=[pb.TokenizeResponse.Offset(start=p.start, end=p.end) for p in pieces]
                if request.return_offsets else []))
        return pb.BatchedTokenizeResponse(responses=responses)

    async def ModelInfo(self, request: pb.ModelInfoRequest,  # noqa: N802
                        context: grpc.aio.ServicerContext) -> pb.ModelInfoResponse:
        limits = self.backend.limits
        return pb.ModelInfoResponse(model_kind=pb.ModelInfoResponse.DECODER_ONLY,
                                    max_sequence_length=limits.max_sequence_length,
                                    max_new_tokens=limits.max_new_tokens)

    def _final_response(self, prepared: PreparedInput, settings: DecodingSettings, generation: Generation,
                        flags: ResponseFlags) -> pb.GenerationResponse:
        return pb.GenerationResponse(
            input_token_count=len(prepared.tokens), generated_token_count=len(generation.tokens),
            text=(prepared.text if flags.input_text else "") + generation.text,
            stop_reason=generation.stop_reason.name, stop_sequence=generation.stop_sequence, seed=settings.seed,
            tokens=[_token_info(t, flags) for t in generation.tokens] if flags.generated_tokens else [],
            input_tokens=self._input_infos(prepared, flags, settings))

    def _input_infos(self, prepared: PreparedInput, flags: ResponseFlags,
                     settings: DecodingSettings) -> list[pb.TokenInfo]:
        if not flags.input_tokens:
            return []
        details = self.backend.model.input_details(prepared.tokens, prepared.prefix_tokens, settings.top_n_tokens)
        return [_token_info(detail, flags) for detail in details]


def _prefix_id(request: pb.BatchedGenerationRequest | pb.SingleGenerationRequest) -> str | None:
    if request.HasField("adapter_id") and request.adapter_id:
        return request.adapter_id
    return request.prefix_id if request.HasField("prefix_id") else None


def _token_info(detail: TokenDetail, flags: ResponseFlags) -> pb.TokenInfo:
    info = pb.TokenInfo(text=detail.text)
    if flags.logprobs:
        info.logprob = detail.logprob
    if flags.ranks:
        info.rank = detail.rank
    if flags.top_n:
        info.top_tokens.extend(pb.TokenInfo.TopToken(text=text, logprob=logprob)
                               for text, logprob in detail.top_tokens)
    return info


class RunningServer:
    """A started server: `address` ("host:port"), `port`, `backend` (ModelServer) and `stop()`."""

    def __init__(self, server: grpc.aio.Server, host: str, port: int, backend: ModelServer) -> None:
        self.server = server
        self.host = host
        self.port = port
        self.backend = backend
        self.http_port: int | None = None  # the OpenAI-compatible HTTP front's, when served
        self.http_runner: Any = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def stop(self, grace: float | None = 1.0) -> None:
        if self.http_runner is not None:
            await self.http_runner.cleanup()
        await self.server.stop(grace)


async def start_server(settings: ServerSettings) -> RunningServer:
    """Serve on the running event loop; TopsailError when the port cannot be bound."""
    backend = ModelServer(settings.model_name, settings.config, gpu_profile=settings.gpu_profile,
                          zero_latency=settings.zero_latency, diverge=settings.diverge, prefixes=settings.prefixes,
                          time_scale=settings.time_scale, served=settings.served)
    if settings.itl_factor != 1.0:
        latency = backend.latency
        backend.latency = dataclasses.replace(latency, itl_base_ms=latency.itl_base_ms * settings.itl_factor,
                                              itl_ms_per_running=latency.itl_ms_per_running * settings.itl_factor)
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    pb_grpc.add_GenerationServiceServicer_to_server(GenerationServicer(backend), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    try:
        address = f"{settings.host}:{settings.port}"
        if settings.tls_cert_pem and settings.tls_key_pem:
            credentials = grpc.ssl_server_credentials([(settings.tls_key_pem, settings.tls_cert_pem)])
            port = server.add_secure_port(address, credentials)
        else:
            port = server.add_insecure_port(address)
    except RuntimeError as error:
        address = f"{settings.host}:{settings.port}"
        raise TopsailError(f"TGIS reference server: cannot listen on {address}: {error}") from None
    await server.start()
    for service in ("", SERVICE_NAME):
        await health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    running = RunningServer(server, settings.host, port, backend)
    if settings.http_port is not None:
        from pytest_topsail.tgis.openai_http import OpenAIFront, start_http

        try:
            running.http_runner, running.http_port = await start_http(OpenAIFront(backend), settings.host,
                                                                      settings.http_port)
        except OSError as error:
            await server.stop(None)
            raise TopsailError(f"TGIS reference server: cannot listen on {settings.host}:{settings.http_port} "
                               f"(HTTP): {error.strerror or error}") from None
    return running


class ServerThread:
    """A reference server on its own event loop in a daemon thread, for synchronous callers."""

    def __init__(self, settings: ServerSettings, start_timeout: float = 30.0) -> None:
        self.settings = settings
        self.start_timeout = start_timeout
        self.loop = asyncio.new_event_loop()
        self.running: RunningServer | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, name="tgis-reference-server", daemon=True)

    def __enter__(self) -> RunningServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> RunningServer:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(start_server(self.settings), self.loop)
        try:
            self.running = future.result(self.start_timeout)
        except BaseException:
            self._stop_loop()
            raise
        return self.running

    def stop(self, timeout: float = 10.0) -> None:
        if self.running is not None:
            asyncio.run_coroutine_threadsafe(self.running.stop(0.5), self.loop).result(timeout)
            self.running = None
        self._stop_loop()

    def _stop_loop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


def environment_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """ServerSettings fields a server's (or a simulated pod's) environment asks for: TOPSAIL_TGIS_DIVERGE=1 (diverge)
    and TOPSAIL_TGIS_PREFIXES='{"id": "prefix text"}' (known prefix/adapter ids). ValueError naming a bad value."""
    settings: dict[str, Any] = {}
    if env.get(DIVERGE_ENV, "").strip().lower() not in ("", "0", "false", "no"):
        settings["diverge"] = True
    if env.get(PREFIXES_ENV, "").strip():
        try:
            prefixes = json.loads(env[PREFIXES_ENV])
        except json.JSONDecodeError as error:
            raise ValueError(f"{PREFIXES_ENV} is not JSON: {error}") from None
        if not isinstance(prefixes, dict) or not all(isinstance(v, str) for v in prefixes.values()):
            raise ValueError(f'{PREFIXES_ENV} must be a JSON object of id -> prefix text, e.g. {{"p1": "Answer:"}}')
        settings["prefixes"] = prefixes
    if env.get(ITL_FACTOR_ENV, "").strip():
        try:
            settings["itl_factor"] = float(env[ITL_FACTOR_ENV])
        except ValueError:
            raise ValueError(f"{ITL_FACTOR_ENV} must be a number, got {env[ITL_FACTOR_ENV]!r}") from None
        if settings["itl_factor"] <= 0:
            raise ValueError(f"{ITL_FACTOR_ENV} must be > 0, got {env[ITL_FACTOR_ENV]!r}")
    return settings


def parse_args(argv: Sequence[str] | None) -> ServerSettings:
    parser = argparse.ArgumentParser(prog="python -m pytest_topsail.tgis.server",
                                     description="The reference TGIS server (deterministic toy model).")
    parser.add_argument("--model", required=True, help="model name, e.g. bigscience/bloom-560m")
    parser.add_argument("--config-json", default="{}", help="tgis-tester ModelConfig as JSON (defaults apply)")
    parser.add_argument("--gpu-profile", default="a100", help="GPU profile of the latency model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", "--grpc-port", type=int, default=8033, dest="port", help="gRPC port; 0: free one")
    parser.add_argument("--http-port", type=int, default=None,
                        help="also serve the OpenAI-compatible HTTP API on this port; 0: a free one")
    parser.add_argument("--zero-latency", action="store_true", help="answer at once (benchmarks)")
    parser.add_argument("--diverge", action="store_true", help="make this server's text differ (suite self-test)")
    parser.add_argument("--prefix", action="append", default=[], metavar="ID=TEXT", help="a known prefix id")
    parser.add_argument("--tls-cert-path", help="PEM certificate: serve gRPC over TLS (with --tls-key-path)")
    parser.add_argument("--tls-key-path", help="PEM private key of --tls-cert-path")
    args = parser.parse_args(argv)
    if bool(args.tls_cert_path) != bool(args.tls_key_path):
        parser.error("--tls-cert-path and --tls-key-path go together")
    tls: list[bytes | None] = []
    for path in (args.tls_cert_path, args.tls_key_path):
        try:
            tls.append(Path(path).read_bytes() if path else None)
        except OSError as error:
            parser.error(f"cannot read {path}: {error.strerror}")
    try:
        config_data = json.loads(args.config_json)
    except json.JSONDecodeError as error:
        parser.error(f"--config-json is not JSON: {error}")
    prefixes = {}
    for item in args.prefix:
        key, sep, text = item.partition("=")
        if not sep or not key:
            parser.error(f"--prefix takes ID=TEXT, got {item!r}")
        prefixes[key] = text
    try:
        config = load_model_config(config_data, "--config-json")
    except TopsailError as error:
        parser.error(str(error))
    try:
        from_env = environment_settings(os.environ)
    except ValueError as error:
        parser.error(str(error))
    return ServerSettings(model_name=args.model, config=config, gpu_profile=args.gpu_profile, host=args.host,
                          port=args.port, http_port=args.http_port, zero_latency=args.zero_latency,
                          diverge=args.diverge or from_env.get("diverge", False),
                          prefixes={**from_env.get("prefixes", {}), **prefixes},
                          tls_cert_pem=tls[0], tls_key_pem=tls[1])


async def serve_until_signalled(settings: ServerSettings) -> None:
    running = await start_server(settings)
    if running.http_port is not None:
        print(f"OpenAI-compatible HTTP listening on {running.host}:{running.http_port}", flush=True)
    print(f"TGIS reference server listening on {running.address}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await running.stop(1.0)


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    try:
        asyncio.run(serve_until_signalled(settings))
    except TopsailError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
