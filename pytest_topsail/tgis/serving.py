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

Admission is the simulated vLLM scheduler's (kvcache.py): a request joins the running batch (at most
max_batch_size) when the KV-cache blocks of its tokens are free, waits in FIFO order otherwise, is preempted (and
computes its tokens again when readmitted) when a running request needs a block none is free for; with prefix
caching a cached prefix skips its part of the prefill; a request naming a LoRA adapter waits for one of max_loras
slots and pays its load time. The default capacity (the GPU's memory as vLLM sizes it) is far above what the
suites' batches hold, so without a small ``num_gpu_blocks_override`` admission is TGIS's. ``metrics``
(vllm_metrics.py) counts what vLLM's ``/metrics`` shows.

A ``time_scale`` below 1 (the simulator's ``plugins.kserve.serving_time_scale``) sleeps that fraction of the modelled
times, and of a request's time limit, in real time. Each request's ``ServedTime`` counts what the scale took off
(``compressed_s``: simulated minus real time slept or queued), which the gRPC server returns in trailing metadata
so a client can report the latency in simulated time (pytest_topsail.tgis.client).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from bisect import bisect_left
from collections.abc import AsyncGenerator, Iterator, Mapping
from dataclasses import dataclass

from pytest_topsail.tgis.catalog import ServedModel
from pytest_topsail.tgis.kvcache import CacheConfig, RequestState, Scheduler, prompt_hashes
from pytest_topsail.tgis.latency import LatencyModel
from pytest_topsail.tgis.model_config import ModelConfig
from pytest_topsail.tgis.sizing import UNSIZED, served_model
from pytest_topsail.tgis.tokenizer import Piece, tokenize
from pytest_topsail.tgis.toymodel import DecodingSettings, Generation, Step, StopReason, ToyModel
from pytest_topsail.tgis.validation import InvalidRequest, Limits, check_input_length
from pytest_topsail.tgis.vllm_metrics import ServingMetrics

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
        sized = served or served_model(model_name) or UNSIZED
        if zero_latency:
            self.latency = LatencyModel.zero(self.config.max_batch_size, self.config.max_concurrent_requests)
        else:
            self.latency = LatencyModel.for_config(self.config, gpu_profile, sized.active_billions)
        self.prefixes = {key: [p.text for p in tokenize(text)] for key, text in (prefixes or {}).items()}
        self.in_server = 0
        self.scheduler = Scheduler(CacheConfig.for_model(self.config, gpu_profile, model_name, sized))
        capacity = self.scheduler.capacity_tokens()
        if capacity < self.config.max_sequence_length:
            raise ValueError(f"model {model_name}: the KV cache holds {capacity} tokens "  # vLLM refuses to start
                             f"({self.scheduler.config.num_blocks} blocks of {self.scheduler.config.block_size}), "
                             f"less than max_sequence_length {self.config.max_sequence_length}")
        self.adapters = tuple(name.strip() for name in (self.config.lora_adapters or "").split(",") if name.strip())
        self.metrics = ServingMetrics(model_name, self.config.max_sequence_length)

    @property
    def running(self) -> int:
        """Requests in the running batch (decoding, or computing their prompt)."""
        return len(self.scheduler.running)

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
                       served: ServedTime | None = None, adapter: str | None = None,
                       ) -> AsyncGenerator[tuple[Generation, Step], None]:
        """Decode one request, yielding after each token; its blocks and batch seat are released however the caller
        stops (a caller that stops early is an aborted request). ``served`` (optional) accumulates the time the time
        scale took off; ``adapter``: the LoRA adapter the request names."""
        loop = asyncio.get_running_loop()
        scale = self.time_scale
        arrival = loop.time()
        deadline = arrival + time_limit_ms / 1000 * scale if time_limit_ms else None
        prompt = prepared.prefix_tokens + prepared.tokens
        generation = Generation(self.model, prompt, settings, deadline=deadline, clock=loop.time)
        latency, scheduler, metrics = self.latency, self.scheduler, self.metrics
        hashes = (prompt_hashes(prompt, scheduler.config.block_size, adapter)
                  if scheduler.config.enable_prefix_caching else ())
        request = scheduler.add(len(prompt), hashes, adapter)
        first = last = arrival
        try:
            # the queue moves at the scaled pace of the requests ahead; a free seat is no queue, whatever the time
            # between the two clock readings (the process descheduled on a loaded machine)
            queued = time.monotonic()
            if await self._admission(request) and served is not None and scale < 1:
                served.compressed_s += (time.monotonic() - queued) * (1 / scale - 1)
            admitted = loop.time()
            metrics.observe("request_queue_time_seconds", (admitted - arrival) / scale)
            due = await self._prefill(request, admitted, served)  # when the next step is due (module docstring)
            while request.recompute:  # preempted during its prefill
                due = await self._resume(request, served)
            if scheduler.config.enable_prefix_caching:  # vLLM's usage.prompt_tokens_details.cached_tokens
                generation.cached_tokens = request.cached_tokens
            first = last = loop.time()
            metrics.observe("time_to_first_token_seconds", (first - arrival) / scale)
            metrics.observe("request_prefill_time_seconds", (first - admitted) / scale)
            # the hot path: per token, O(1) bookkeeping and one bucket search (module docstring)
            zero, itl_counts, itl_buckets = latency.is_zero, metrics.itl.counts, metrics.itl.buckets
            per_second = 1 / scale
            while True:
                step = generation.step()
                yield generation, step
                if generation.finished:
                    return
                if request.tokens >= request.capacity:  # its blocks are full: the scheduler finds it one
                    if scheduler.append_token(request):
                        self._admit_waiting()
                else:
                    request.tokens += 1
                if not (request.recompute or zero):
                    due = await self._pace(due, latency.inter_token_seconds(len(scheduler.running)), served)
                while request.recompute:
                    due = await self._resume(request, served)
                now = loop.time()
                itl_counts[bisect_left(itl_buckets, (now - last) * per_second)] += 1
                last = now
        finally:
            scheduler.finish(request)
            self._admit_waiting()
            reason = ("abort" if not generation.finished
                      else "stop" if generation.stop_reason in (StopReason.EOS_TOKEN, StopReason.STOP_SEQUENCE)
                      else "length")
            metrics.request_done(reason, len(prompt), len(generation.tokens), (loop.time() - arrival) / scale,
                                 (last - first) / scale)
            metrics.itl.total += (last - first) / scale  # the sum of its observed gaps

    async def _admission(self, request: RequestState) -> bool:
        """Until the scheduler admits the request; whether it had to wait."""
        if not request.running:
            self._admit_waiting()
        if request.running:
            return False
        request.waker = asyncio.get_running_loop().create_future()
        try:
            await request.waker
        finally:
            request.waker = None
        return True

    def _admit_waiting(self) -> None:
        for request in self.scheduler.schedule():
            if request.waker is not None and not request.waker.done():
                request.waker.set_result(None)

    async def _prefill(self, request: RequestState, due: float, served: ServedTime | None) -> float:
        """The (re)computation of the request's uncached tokens, and its adapter's load; the new due time."""
        if not self.latency.is_zero:
            seconds = self.latency.prefill_seconds(request.to_compute)
            if request.load_lora:
                seconds += self.scheduler.config.lora_load_s
            due = await self._pace(due, seconds, served)
        if request.hashes:
            self.scheduler.prefilled(request)
        return due

    async def _resume(self, request: RequestState, served: ServedTime | None) -> float:
        """A preempted request: back in the batch, its tokens computed again; the new due time."""
        request.recompute = False
        await self._admission(request)
        return await self._prefill(request, asyncio.get_running_loop().time(), served)

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
