"""The Backend protocol of the load generator: one object per load test, one connection pool or channel inside it.

``send`` fills the record (``tokens()`` for each streamed chunk, then ``input_tokens``/``output_tokens``) and raises
``BackendError(status, message)`` on a failed request; the generator times the request around it.
"""

from __future__ import annotations

from typing import Protocol

from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.records import RequestRecord


class BackendError(Exception):
    """A failed request: ``status`` is the failure code counted in the metrics (``http_429``, ``UNAVAILABLE``...)."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Backend(Protocol):
    name: str
    stream: bool

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def send(self, prompt: Prompt, record: RequestRecord) -> None: ...
