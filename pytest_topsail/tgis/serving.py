"""The reference server's request handling without any transport: validation, admission, latency, decoding.

`ModelServer` is what the gRPC server (server.py) and the OpenAI-compatible HTTP front call. It owns the toy model,
the limits of the ModelConfig and the latency model. Admission follows TGIS: more than max_concurrent_requests
requests in the server are refused (`Overloaded`); at most max_batch_size decode at once, the others wait in FIFO
order. Each admitted request sleeps its prefill time before its first token and the inter-token latency of the
current batch before each next one (no sleeping at all with a zero latency model).

The sleeps keep a schedule: each token is due its modelled time after the previous one was *due*, not after it was
sent. The server shares its process (the simulator's) with the API server, the controllers and the metrics it
serves, and a stall of that process (tens of ms in a busy session) would otherwise be added to every later token of
every running request, turning the host's hiccups into a slower model: a token late past its due time goes out at
once, and the next is due on the schedule again. Only a process that stays behind for good (a machine too slow for
the load) makes the served times longer than the model's.

A ``time_scale`` below 1 (the simulator's ``plugins.kserve.serving_time_scale``) sleeps that fraction of the modelled
times, and of a request's time limit, in real time. Each request's ``ServedTime`` counts what the scale took off
(``compressed_s``: simulated minus real time slept or queued), which the gRPC server returns in trailing metadata
so a client can report the latency in simulated time (pytest_topsail.tgis.client).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Iterator, Mapping
from dataclasses import dataclass

from pytest_topsail.tgis.catalog import ServedModel
from pytest_topsail.tgis.latency import LatencyModel
from pytest_topsail.tgis.model_config import ModelConfig
from pytest_topsail.tgis.sizing import active_params_billions
from pytest_topsail.tgis.tokenizer import Piece, tokenize
from pytest_topsail.tgis.toymodel import DecodingSettings, Generation, Step, ToyModel
from pytest_topsail.tgis.validation import InvalidRequest, Limits, check_input_length

OVERLOADED_MESSAGE = "Model is overloaded"


class Overloaded(Exception):
    """More requests than max_concurrent_requests (TGIS answers RESOURCE_EXHAUSTED "Model is overloaded")."""


@dataclass(frozen=True)
class PreparedInput:
    text: str
    tokens: list[str]  # after truncation
    prefix_tokens: list[str]


class ServedTime:
    """One request's time taken off by the time scale: simulated seconds minus the real seconds they took."""

    def __init__(self) -> None:
        self.compressed_s = 0.0


class ModelServer:
    def __init__(self, model_name: str, config: ModelConfig | None = None, *, gpu_profile: str = "a100",
                 zero_latency: bool = False, diverge: bool = False,
                 prefixes: Mapping[str, str] | None = None, include_stop_sequence: bool = True,
                 time_scale: float = 1.0, served: ServedModel | None = None) -> None:
        if not 0 < time_scale <= 1:
            raise ValueError(f"time_scale must be in (0, 1], got {time_scale}")
        self.time_scale = time_scale
        self.model_name = model_name
        self.config = config or ModelConfig()
        self.gpu_profile = gpu_profile
        self.model = ToyModel(model_name, config_name=self.config.name, dtype=self.config.dtype_str,
                              diverge=diverge, output_special_tokens=self.config.output_special_tokens)
        self.limits = Limits(self.config.max_sequence_length, self.config.max_new_tokens, include_stop_sequence)
        if zero_latency:
            self.latency = LatencyModel.zero(self.config.max_batch_size, self.config.max_concurrent_requests)
        else:
            active = served.active_billions if served else active_params_billions(model_name)
            self.latency = LatencyModel.for_config(self.config, gpu_profile, active)
        self.prefixes = {key: [p.text for p in tokenize(text)] for key, text in (prefixes or {}).items()}
        self.in_server = 0
        self.running = 0
        self._slots: asyncio.Semaphore | None = None

    @contextlib.contextmanager
    def admitted(self, count: int = 1) -> Iterator[None]:
        """Count `count` requests in the server while the block runs; Overloaded when over the limit."""
        if self.in_server + count > self.config.max_concurrent_requests:
            raise Overloaded(OVERLOADED_MESSAGE)
        self.in_server += count
        try:
            yield
        finally:
            self.in_server -= count

    def prefix_tokens(self, prefix_id: str | None) -> list[str]:
        if not prefix_id:
            return []
        try:
            return self.prefixes[prefix_id]
        except KeyError:
            raise InvalidRequest(f"can't retrieve prompt prefix with id '{prefix_id}': prefix not found") from None

    def prepare(self, text: str, truncate_input_tokens: int, prefix: list[str]) -> PreparedInput:
        tokens = [p.text for p in tokenize(text)]
        if 0 < truncate_input_tokens < len(tokens):
            tokens = tokens[-truncate_input_tokens:]
        return PreparedInput(text, tokens, prefix)

    def fit(self, settings: DecodingSettings, prepared: PreparedInput) -> DecodingSettings:
        return check_input_length(settings, len(prepared.tokens), len(prepared.prefix_tokens), self.limits)

    def tokenize(self, text: str, truncate_input_tokens: int = 0) -> tuple[Piece, ...]:
        pieces = tokenize(text)
        return pieces[-truncate_input_tokens:] if 0 < truncate_input_tokens < len(pieces) else pieces

    async def generate(self, prepared: PreparedInput, settings: DecodingSettings, time_limit_ms: int = 0,
                       served: ServedTime | None = None) -> AsyncGenerator[tuple[Generation, Step], None]:
        """Decode one request, yielding after each token; the batch slot is released however the caller stops.
        ``served`` (optional) accumulates the time the time scale took off."""
        loop = asyncio.get_running_loop()
        scale = self.time_scale
        deadline = loop.time() + time_limit_ms / 1000 * scale if time_limit_ms else None
        generation = Generation(self.model, prepared.prefix_tokens + prepared.tokens, settings,
                                deadline=deadline, clock=loop.time)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.config.max_batch_size)
        latency = self.latency
        queued, waits = time.monotonic(), self._slots.locked()
        async with self._slots:
            # the queue moves at the scaled pace of the requests ahead; a free slot is no queue, whatever the time
            # between the two clock readings (the process descheduled on a loaded machine)
            if served is not None and scale < 1 and waits:
                served.compressed_s += (time.monotonic() - queued) * (1 / scale - 1)
            self.running += 1
            due = loop.time()  # when the next step is due on the model's schedule (the module's docstring)
            try:
                if not latency.is_zero:
                    due = await self._pace(due, latency.prefill_seconds(len(prepared.tokens) +
                                                                        len(prepared.prefix_tokens)), served)
                while True:
                    step = generation.step()
                    yield generation, step
                    if generation.finished:
                        return
                    if not latency.is_zero:
                        due = await self._pace(due, latency.inter_token_seconds(self.running), served)
            finally:
                self.running -= 1

    async def _pace(self, due: float, simulated_s: float, served: ServedTime | None) -> float:
        """Sleep until ``simulated_s`` (scaled) after ``due``, at once when that is past; the new due time."""
        due += simulated_s * self.time_scale
        await asyncio.sleep(max(due - asyncio.get_running_loop().time(), 0.0))
        if served is not None:
            served.compressed_s += simulated_s * (1 - self.time_scale)
        return due

    async def complete(self, prepared: PreparedInput, settings: DecodingSettings,
                       time_limit_ms: int = 0, served: ServedTime | None = None) -> Generation:
        """Decode one request to its end."""
        result = None
        async with contextlib.aclosing(self.generate(prepared, settings, time_limit_ms, served)) as steps:
            async for generation, _step in steps:
                result = generation
        assert result is not None and result.finished
        return result
