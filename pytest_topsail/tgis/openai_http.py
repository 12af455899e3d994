"""The reference server's OpenAI-compatible HTTP front (as vLLM serves it): ``/v1/completions``,
``/v1/chat/completions`` (answers whole or streamed as server-sent events), ``/v1/models``, ``/health`` and
``/metrics`` (vLLM's metrics, vllm_metrics.py).

Every request goes through the same ``ModelServer`` as the gRPC front (serving.py): same toy model, same admission
(max_concurrent_requests, max_batch_size) and the same latency model, so both fronts load one simulated GPU alike.
A request's ``model`` is the served model or one of its LoRA adapters (ModelConfig.lora_adapters, listed by
``/v1/models`` with the model as parent), which the scheduler places in a slot (kvcache.py). A client that goes away
mid-stream ends its request as aborted (vLLM's ``finished_reason="abort"``), without a traceback.
Request fields used: model, prompt | messages (content: a string or text parts), max_tokens (default 16; chat:
max_completion_tokens first), min_tokens and ignore_eos (vLLM's extensions), temperature (0 = greedy), top_p, top_k,
seed, stop, stream, stream_options.include_usage.
Errors are vLLM's: ``{"object": "error", "message", "type", "param", "code"}`` with 400 (invalid request), 404
(unknown model) or 503 (more than max_concurrent_requests in the server).
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from pytest_topsail.tgis.serving import ModelServer, Overloaded
from pytest_topsail.tgis.toymodel import DecodingSettings, Generation, StopReason
from pytest_topsail.tgis.validation import InvalidRequest

DEFAULT_MAX_TOKENS = 16
FINISH_REASONS = {StopReason.EOS_TOKEN: "stop", StopReason.STOP_SEQUENCE: "stop"}


class ApiError(Exception):
    def __init__(self, status: int, kind: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.param = status, kind, message, param

    def response(self) -> web.Response:
        body = {"object": "error", "message": self.message, "type": self.kind, "param": self.param,
                "code": self.status}
        return web.json_response(body, status=self.status)


def bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, "BadRequestError", message, param)


@dataclass(frozen=True)
class Completion:
    """A parsed request: the prompt text, the decoding settings and how to answer."""

    chat: bool
    text: str
    settings: DecodingSettings
    stream: bool
    include_usage: bool
    adapter: str | None = None  # the LoRA adapter the request's model names


def number(body: dict[str, Any], key: str, default: float, kind: type = float) -> Any:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and not isinstance(value, int)):
        raise bad_request(f"{key} must be {'an integer' if kind is int else 'a number'}, got {value!r}", key)
    return kind(value)


def prompt_text(body: dict[str, Any], chat: bool) -> str:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise bad_request("messages must be a non-empty list", "messages")
        lines = []
        for message in messages:
            if not isinstance(message, dict):
                raise bad_request("each message needs a role and a content", "messages")
            lines.append(f"{message.get('role', 'user')}: {message_content(message.get('content'))}")
        return "\n".join(lines) + "\nassistant:"
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise bad_request("prompt must be a string (one prompt per request)", "prompt")
    return prompt


def message_content(content: Any) -> str:
    """A message's text: a string, or a list of content parts whose text parts vLLM joins with newlines (what
    guidellm sends: ``[{"type": "text", "text": ...}]``); a part of another type is refused, as by a text-only model."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise bad_request("a message's content must be a string or a list of content parts", "messages")
    texts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise bad_request(f"content part of type {kind!r}: this model takes text parts only", "messages")
        texts.append(part["text"])
    return "\n".join(texts)


def decoding_settings(body: dict[str, Any], chat: bool = False) -> DecodingSettings:
    # chat: OpenAI's max_completion_tokens (what guidellm sends) wins over the deprecated max_tokens, as in vLLM
    limit = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = number(body, limit, DEFAULT_MAX_TOKENS, int)
    if max_tokens < 1:
        raise bad_request(f"{limit} must be at least 1, got {max_tokens}.", limit)
    min_tokens = number(body, "min_tokens", 0, int)
    if body.get("ignore_eos"):
        min_tokens = max_tokens
    if not 0 <= min_tokens <= max_tokens:
        raise bad_request(f"min_tokens must be in [0, max_tokens={max_tokens}], got {min_tokens}.", "min_tokens")
    temperature = number(body, "temperature", 1.0)
    if temperature < 0:
        raise bad_request(f"temperature must be non-negative, got {temperature}.", "temperature")
    top_p = number(body, "top_p", 1.0)
    if not 0 < top_p <= 1:
        raise bad_request(f"top_p must be in (0, 1], got {top_p}.", "top_p")
    top_k = number(body, "top_k", 0, int)
    stop = body.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else tuple(stop)
    if not all(isinstance(s, str) for s in stop):
        raise bad_request("stop must be a string or a list of strings", "stop")
    sample = temperature > 0
    return DecodingSettings(sample=sample, temperature=temperature if sample else 1.0, top_k=max(top_k, 0),
                            top_p=top_p, seed=number(body, "seed", 0, int), min_new_tokens=min_tokens,
                            max_new_tokens=max_tokens, stop_sequences=stop, include_stop_sequence=False)


class OpenAIFront:
    """aiohttp handlers over one ModelServer; ``app()`` builds the application."""

    def __init__(self, server: ModelServer, served_model_name: str | None = None) -> None:
        self.server = server
        self.model_name = served_model_name or server.model_name
        self.created = int(time.time())

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics)
        return app

    async def metrics(self, _request: web.Request) -> web.Response:
        config = self.server.config
        text = self.server.metrics.render(self.server.scheduler,
                                          {"gpu_memory_utilization": str(config.gpu_memory_utilization)})
        return web.Response(text=text, content_type="text/plain", charset="utf-8",
                            headers={"X-Content-Type-Options": "nosniff"})

    async def health(self, _request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def models(self, _request: web.Request) -> web.Response:
        card = {"id": self.model_name, "object": "model", "created": self.created, "owned_by": "pytest-topsail",
                "root": self.model_name, "parent": None, "max_model_len": self.server.config.max_sequence_length}
        adapters = [{**card, "id": name, "root": name, "parent": self.model_name} for name in self.server.adapters]
        return web.json_response({"object": "list", "data": [card, *adapters]})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self.answer(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self.answer(request, chat=True)

    async def parse(self, request: web.Request, chat: bool) -> Completion:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise bad_request("the request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        model = body.get("model", self.model_name)
        if model != self.model_name and model not in self.server.adapters:
            raise ApiError(404, "NotFoundError", f"The model `{body.get('model')}` does not exist.", "model")
        options = body.get("stream_options") or {}
        return Completion(chat=chat, text=prompt_text(body, chat), settings=decoding_settings(body, chat),
                          stream=bool(body.get("stream")), include_usage=bool(options.get("include_usage")),
                          adapter=None if model == self.model_name else model)

    async def answer(self, request: web.Request, chat: bool) -> web.StreamResponse:
        try:
            completion = await self.parse(request, chat)
            prepared = self.server.prepare(completion.text, 0, [])
            try:
                settings = self.server.fit(completion.settings, prepared)
            except InvalidRequest as error:
                raise bad_request(str(error), "max_tokens") from None
            with self.server.admitted():
                steps = contextlib.aclosing(self.server.generate(prepared, settings, adapter=completion.adapter))
                if completion.stream:
                    return await self.stream(request, completion, len(prepared.tokens), steps)
                return await self.whole(completion, len(prepared.tokens), steps)
        except Overloaded as error:
            return ApiError(503, "ServiceUnavailableError", str(error)).response()
        except ApiError as error:
            return error.response()

    def envelope(self, completion: Completion, request_id: str, chunk: bool) -> dict[str, Any]:
        kind = ("chat.completion.chunk" if chunk else "chat.completion") if completion.chat else "text_completion"
        return {"id": request_id, "object": kind, "created": int(time.time()), "model": self.model_name}

    def choice(self, completion: Completion, text: str, finish: str | None, *, first: bool = False,
               whole: bool = False) -> dict[str, Any]:
        if not completion.chat:
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}
        content = {"role": "assistant", "content": text} if first or whole else {"content": text}
        return {"index": 0, ("message" if whole else "delta"): content, "logprobs": None, "finish_reason": finish}

    async def whole(self, completion: Completion, input_tokens: int,
                    steps: contextlib.aclosing[AsyncGenerator[tuple[Generation, Any], None]]) -> web.Response:
        generation = None
        async with steps as decoding:
            async for step_generation, _step in decoding:
                generation = step_generation
        assert generation is not None
        body = self.envelope(completion, new_id(completion), chunk=False)
        body["choices"] = [self.choice(completion, generation.text, finish_reason(generation), whole=True)]
        body["usage"] = usage(input_tokens, len(generation.tokens), generation.cached_tokens)
        return web.json_response(body)

    async def stream(self, request: web.Request, completion: Completion, input_tokens: int,
                     steps: contextlib.aclosing[AsyncGenerator[tuple[Generation, Any], None]]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        request_id = new_id(completion)
        base = self.envelope(completion, request_id, chunk=True)
        if completion.chat:
            await send_event(response, {**base, "choices": [self.choice(completion, "", None, first=True)]})
        generation = None
        try:
            async with steps as decoding:  # leaving it early (the client went away) aborts the request
                async for generation, step in decoding:
                    finish = finish_reason(generation) if generation.finished else None
                    if step.text or finish:
                        await send_event(response, {**base, "choices": [self.choice(completion, step.text, finish)]})
            if completion.include_usage and generation is not None:
                await send_event(response, {**base, "choices": [],
                                            "usage": usage(input_tokens, len(generation.tokens),
                                                           generation.cached_tokens)})
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionResetError:  # the client closed the stream (aiohttp's ClientConnectionResetError)
            pass
        return response


def finish_reason(generation: Generation) -> str:
    return FINISH_REASONS.get(generation.stop_reason, "length")


def usage(input_tokens: int, output_tokens: int, cached_tokens: int | None = None) -> dict[str, Any]:
    """vLLM's usage; with prefix caching, ``prompt_tokens_details.cached_tokens`` (as vLLM with
    --enable-prompt-tokens-details): the prompt tokens its prefix cache held."""
    counts: dict[str, Any] = {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                              "total_tokens": input_tokens + output_tokens}
    if cached_tokens is not None:
        counts["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return counts


def new_id(completion: Completion) -> str:
    return ("chatcmpl-" if completion.chat else "cmpl-") + uuid.uuid4().hex


async def send_event(response: web.StreamResponse, event: dict[str, Any]) -> None:
    await response.write(b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n")


async def start_http(front: OpenAIFront, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, int]:
    """Serve the front on host:port (0: any free port) in the running loop; returns the runner and the port."""
    runner = web.AppRunner(front.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    return runner, runner.addresses[0][1]
