"""OpenAI-compatible HTTP backend (vLLM, TGIS's HTTP front, our simulator): ``/v1/completions`` or
``/v1/chat/completions``, streamed as server-sent events or not, over one aiohttp session (one connection pool).

Output lengths are pinned with vLLM's ``min_tokens`` and ``ignore_eos`` extensions next to ``max_tokens``, so a request
generates the dataset's output length; ``stream_options.include_usage`` asks for the server's token counts.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from pytest_topsail.llmload.backends import BackendError
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.records import RequestRecord

APIS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
JSON_TYPE = {"Content-Type": "application/json"}
DONE_GRACE_S = 1.0  # how long the end of a stream may follow its [DONE] event
READ_BUFFER = 2**20  # aiohttp's 64 KiB default cannot hold one SSE line of a long completion


@dataclass
class OpenAIBackend:
    url: str
    model: str
    api: str = "completions"
    stream: bool = True
    pin_output_length: bool = True
    api_key: str | None = field(default=None, repr=False)
    connect_timeout_s: float = 10.0
    name: str = "openai"
    session: aiohttp.ClientSession | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.api not in APIS:
            raise ValueError(f"api must be one of {', '.join(APIS)}, got {self.api!r}")
        self.endpoint = self.url.rstrip("/") + APIS[self.api]
        self.bodies: dict[Prompt, bytes] = {}  # each prompt's request body, encoded once

    async def open(self) -> None:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        connector = aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout_s)
        self.session = aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers,
                                             read_bufsize=READ_BUFFER)

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None

    def body(self, prompt: Prompt) -> dict[str, Any]:
        body: dict[str, Any] = {"model": prompt.model or self.model, "max_tokens": prompt.output_tokens,
                                "stream": self.stream, "temperature": 0.0}
        if self.pin_output_length:
            body.update(min_tokens=prompt.output_tokens, ignore_eos=True)
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if self.api == "chat":
            body["messages"] = prompt.messages()
        else:
            body["prompt"] = prompt.full_text()
        return body

    async def send(self, prompt: Prompt, record: RequestRecord) -> None:
        """One request; a failure's message never holds the API key (a server may echo it, or its header)."""
        try:
            await self._send(prompt, record)
        except BackendError as error:
            if not self.api_key:
                raise
            from pytest_topsail.redact import redact_text

            raise BackendError(error.status, redact_text(error.message, {self.api_key})) from None

    async def _send(self, prompt: Prompt, record: RequestRecord) -> None:
        if self.session is None:
            raise RuntimeError("OpenAIBackend.send before open()")
        try:
            body = self.bodies.get(prompt)
            if body is None:
                body = self.bodies[prompt] = json.dumps(self.body(prompt)).encode()
            async with self.session.post(self.endpoint, data=body, headers=JSON_TYPE) as response:
                record.acked()
                if response.status != 200:
                    raise BackendError(f"http_{response.status}", await error_message(response))
                if self.stream:
                    await self.read_stream(response, record)
                else:
                    self.read_whole(await response.json(content_type=None), record)
        except aiohttp.ClientError as error:
            raise BackendError(type(error).__name__, str(error) or type(error).__name__) from None

    async def read_stream(self, response: aiohttp.ClientResponse, record: RequestRecord) -> None:
        """The server-sent events as they arrive: split at the bytes level, JSON parsed on ``data:`` lines only
        (one read per network chunk instead of one per line: the per-event cost the client pays)."""
        chunks, pending = 0, b""
        async for data in response.content.iter_any():
            *lines, pending = (pending + data).split(b"\n") if pending else data.split(b"\n")
            for line in lines:
                if line[:5] != b"data:":
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    self.finish_stream(record, chunks)
                    await end_of(response)
                    return
                chunks += self.read_event(payload, record)
        if pending[:5] == b"data:" and pending[5:].strip() not in (b"", b"[DONE]"):  # no final newline
            chunks += self.read_event(pending[5:].strip(), record)
        self.finish_stream(record, chunks)

    def read_event(self, payload: bytes, record: RequestRecord) -> int:
        """One event's JSON: 1 when it carried text (a token chunk, timed now), else 0; a stream error raises."""
        event = json.loads(payload)
        if "error" in event or event.get("object") == "error":
            raise BackendError("stream_error", describe_error(event))
        choices = event.get("choices")
        carried = 0
        if choices and self.text_of(choices[0]):
            record.tokens(1)
            carried = 1
        if event.get("usage"):
            self.read_usage(event, record)
        return carried

    @staticmethod
    def finish_stream(record: RequestRecord, chunks: int) -> None:
        if not record.output_tokens:
            record.output_tokens = chunks
        if not record.input_tokens:
            record.input_tokens = 0

    def text_of(self, choice: dict[str, Any]) -> str:
        if self.api == "chat":
            return (choice.get("delta") or choice.get("message") or {}).get("content") or ""
        return choice.get("text") or ""

    def read_whole(self, answer: dict[str, Any], record: RequestRecord) -> None:
        self.read_usage(answer, record)
        if not record.output_tokens:
            choices = answer.get("choices") or [{}]
            record.output_tokens = len(self.text_of(choices[0]).split())

    @staticmethod
    def read_usage(event: dict[str, Any], record: RequestRecord) -> None:
        usage = event.get("usage")
        if usage:
            record.input_tokens = int(usage.get("prompt_tokens") or 0)
            record.output_tokens = int(usage.get("completion_tokens") or 0)
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
            if cached is not None:  # vLLM with --enable-prompt-tokens-details: its prefix cache's share
                record.cached_tokens = int(cached)


async def end_of(response: aiohttp.ClientResponse) -> None:
    """Read the answer to its end (the chunked terminator follows [DONE]): a response left unread closes its
    connection instead of returning it to the pool, and the next request would pay a new connection."""
    if response.content.is_eof():
        return
    try:
        async with asyncio.timeout(DONE_GRACE_S):
            await response.content.read()
    except TimeoutError:
        pass  # a server holding the stream open after [DONE]: the answer is complete, its connection is dropped


async def error_message(response: aiohttp.ClientResponse) -> str:
    text = await response.text()
    try:
        return describe_error(json.loads(text))
    except (json.JSONDecodeError, AttributeError):
        return text[:300] or response.reason or ""


def describe_error(body: dict[str, Any]) -> str:
    error = body.get("error", body)
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)
