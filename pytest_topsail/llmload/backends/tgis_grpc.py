"""TGIS gRPC backend (``fmaas.GenerationService``): GenerateStream or Generate over one ``TgisClient``, i.e. one
channel whose HTTP/2 connection multiplexes every request of the load test (llm-load-test opens one per request).

Output lengths are pinned with ``min_new_tokens = max_new_tokens`` = the dataset's output length, greedy decoding.
A streamed message carries ``generated_token_count`` (cumulative): its increase is the chunk's token count.
Retries are off: a load test counts an UNAVAILABLE answer as a failure instead of hiding it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import grpc

from pytest_topsail.llmload.backends import BackendError
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.records import RequestRecord


@dataclass
class TgisBackend:
    target: str
    model: str = ""
    stream: bool = True
    call_timeout_s: float = 3600.0  # the load point's timeout_s bounds each request; this only backs it up
    name: str = "tgis"
    client: Any = field(default=None, init=False, repr=False)

    async def open(self) -> None:
        from pytest_topsail.tgis.client import TgisClient  # grpc and the stubs load only for gRPC load tests

        self.client = TgisClient(self.target, model_id=self.model, timeout=self.call_timeout_s, retries=0)

    async def close(self) -> None:
        if self.client is not None:
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
                response = answer.responses[0]
                record.input_tokens = response.input_token_count
                record.output_tokens = response.generated_token_count
        except grpc.aio.AioRpcError as error:
            raise BackendError(error.code().name, error.details() or error.code().name) from None

    async def read_stream(self, text: str, prompt: Prompt, record: RequestRecord) -> None:
        generated = 0
        async for message in self.client.generate_stream(text, self.parameters(prompt.output_tokens)):
            if message.input_token_count:
                record.input_tokens = message.input_token_count
            if message.generated_token_count > generated:
                record.tokens(message.generated_token_count - generated)
                generated = message.generated_token_count
        record.output_tokens = generated
