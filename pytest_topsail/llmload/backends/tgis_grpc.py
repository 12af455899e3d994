"""TGIS gRPC backend (``fmaas.GenerationService``): GenerateStream or Generate over one channel, i.e. one HTTP/2
connection multiplexing every request of the load test (llm-load-test opens one per request).

Output lengths are pinned with ``min_new_tokens = max_new_tokens`` = the dataset's output length, greedy decoding.
A streamed message carries ``generated_token_count`` (cumulative): its increase is the chunk's token count.
Retries are off: a load test counts an UNAVAILABLE answer as a failure instead of hiding it.

Streams go through grpc's synchronous API with the single-threaded unary-stream channel option, each read by a
reader thread: the thread waits for the next message inside grpc's C core (GIL released) and times it the moment it
returns. grpc.aio costs more CPU per streamed message (its completion queue is polled by another thread that wakes
the event loop for every event), which made the client the bottleneck on streams (benchmarks/llm_load.py). The event
loop starts the call and is woken once, when the stream ends. Unary calls stay on grpc.aio (one event per call:
nothing to gain).
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import grpc

from pytest_topsail.llmload.backends import BackendError
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.records import RequestRecord

CANCEL_WAIT_S = 10.0  # a cancelled stream's reader returns at once; this bounds the wait for it


@dataclass
class TgisBackend:
    target: str
    model: str = ""
    stream: bool = True
    call_timeout_s: float = 3600.0  # the load point's timeout_s bounds each request; this only backs it up
    ca_file: str | None = None  # TLS: the CA bundle (PEM) the server's certificate is checked against
    server_name: str | None = None  # TLS: the name its certificate must hold, when not the target's host
    name: str = "tgis"
    client: Any = field(default=None, init=False, repr=False)

    async def open(self) -> None:
        # grpc and the stubs load only for gRPC load tests
        from pytest_topsail.tgis.client import TgisClient, open_channel
        from pytest_topsail.tgis.generation_pb2_grpc import GenerationServiceStub

        if self.stream:
            self.client = open_channel(self.target, self.ca_file, self.server_name, sync=True)
            self.generate_stream = GenerationServiceStub(self.client).GenerateStream
            self.metadata = (("mm-model-id", self.model),) if self.model else ()
            self.readers = Readers()
        else:
            self.client = TgisClient(self.target, model_id=self.model, timeout=self.call_timeout_s, retries=0,
                                     ca_file=self.ca_file, server_name=self.server_name)

    async def close(self) -> None:
        if self.client is None:
            return
        if self.stream:
            self.client.close()  # ends every stream still running, so the readers return
            self.readers.close()
        else:
            await self.client.close()
        self.client = None

    @staticmethod
    @functools.cache
    def parameters(output_tokens: int) -> Any:
        """Greedy decoding of exactly ``output_tokens`` tokens (built once per length: parsing costs per request)."""
        from pytest_topsail.tgis import generation_pb2 as pb

        stopping = pb.StoppingCriteria(max_new_tokens=output_tokens, min_new_tokens=output_tokens)
        return pb.Parameters(method=pb.GREEDY, stopping=stopping)

    async def send(self, prompt: Prompt, record: RequestRecord) -> None:
        if self.client is None:
            raise RuntimeError("TgisBackend.send before open()")
        text = f"{prompt.system_prompt}\n{prompt.text}" if prompt.system_prompt else prompt.text
        try:
            if self.stream:
                await self.read_stream(text, prompt, record)
            else:
                answer = await self.client.generate([text], self.parameters(prompt.output_tokens))
                record.acked()
                response = answer.responses[0]
                record.input_tokens = response.input_token_count
                record.output_tokens = response.generated_token_count
        except grpc.RpcError as error:  # grpc.aio.AioRpcError is one too
            code = error.code()
            raise BackendError(code.name, error.details() or code.name) from None

    async def read_stream(self, text: str, prompt: Prompt, record: RequestRecord) -> None:
        from pytest_topsail.tgis import generation_pb2 as pb

        request = pb.SingleGenerationRequest(model_id=self.model, request=pb.GenerationRequest(text=text),
                                             params=self.parameters(prompt.output_tokens))
        call = self.generate_stream(request, timeout=self.call_timeout_s, metadata=self.metadata)
        done = self.readers.read(call, record)
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            call.cancel()  # timeout or drain: the reader returns, and stops writing the record, before we do
            await asyncio.wait([done], timeout=CANCEL_WAIT_S)
            if done.done() and not done.cancelled():
                done.exception()  # retrieved: the cancelled call's error is no news
            raise


def read_stream(call: Any, record: RequestRecord) -> None:
    """The stream's messages as they arrive (in a reader thread); the record's end is the end of the stream."""
    generated = 0
    for message in call:
        record.acked()
        if message.input_token_count:
            record.input_tokens = message.input_token_count
        if message.generated_token_count > generated:
            record.tokens(message.generated_token_count - generated)
            generated = message.generated_token_count
    record.end = time.perf_counter()
    record.output_tokens = generated


def settle(waiter: asyncio.Future[None], error: BaseException | None) -> None:
    if waiter.done():
        return
    if error is None:
        waiter.set_result(None)
    else:
        waiter.set_exception(error)


class Readers:
    """Threads reading streams: each takes (call, record, waiter) jobs from one queue; a thread is added when every
    thread is busy, so a stream never waits for a reader (its messages would be timed late). As many threads as
    streams were in flight at once; they end with the backend."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[tuple[Any, RequestRecord, asyncio.Future[None]] | None] = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []
        self.idle = 0
        self.lock = threading.Lock()

    def read(self, call: Any, record: RequestRecord) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        with self.lock:
            if self.idle:
                self.idle -= 1
            else:
                thread = threading.Thread(target=self.serve, args=(loop,), name="tgis-stream", daemon=True)
                self.threads.append(thread)
                thread.start()
        self.jobs.put((call, record, waiter))
        return waiter

    def serve(self, loop: asyncio.AbstractEventLoop) -> None:
        while (job := self.jobs.get()) is not None:
            call, record, waiter = job
            error: BaseException | None = None
            try:
                read_stream(call, record)
            except BaseException as raised:  # noqa: BLE001 (handed to the awaiting task)
                error = raised
            with self.lock:
                self.idle += 1
            try:
                loop.call_soon_threadsafe(settle, waiter, error)
            except RuntimeError:  # the loop is closed: nobody awaits this stream any more
                pass

    def close(self) -> None:
        for _ in self.threads:
            self.jobs.put(None)
        deadline = time.monotonic() + CANCEL_WAIT_S
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.threads.clear()
