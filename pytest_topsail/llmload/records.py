"""One record per request: the raw data of a load test, saved as JSON lines, from which every metric is computed.

Times are seconds on the monotonic clock relative to the start of the load point (``t0``): ``scheduled`` (open loop:
when the request was due), ``start`` (just before the request was written), ``ack`` (the first response message, even
an empty one: HTTP response headers, a gRPC stream's first message, a unary answer), ``first_token`` (first chunk
carrying at least one token), ``end`` (last byte of the response or the error), and ``chunks`` as ``[time, tokens]``
pairs, one per streamed chunk that carried tokens.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pytest_topsail.jsonl import read_json_lines

OK = "ok"


@dataclass(slots=True)
class RequestRecord:
    point: int
    index: int
    start: float = 0.0
    end: float = 0.0
    first_token: float | None = None
    ack: float | None = None  # the first response message, even one without a token (headers, a role chunk)
    scheduled: float | None = None
    user: int | None = None
    turn: int | None = None  # a conversation's turn (1: its first), None: no conversation
    stream: bool = True
    warmup: bool = False
    cooldown: bool = False  # issued after the measurement ended (cool-down): kept, out of the metrics
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None  # prompt tokens the server's prefix cache held, when it says (vLLM's usage)
    status: str = OK
    error: str | None = None
    chunks: list[list[float]] = field(default_factory=list)

    def tokens(self, count: int) -> None:
        """A streamed chunk with ``count`` tokens has just arrived (called by the backends)."""
        now = time.perf_counter()
        if self.first_token is None:
            self.first_token = now
        self.chunks.append([now, count])

    def acked(self) -> None:
        """A response message has just arrived (called by the backends for each; the first one counts)."""
        if self.ack is None:
            self.ack = time.perf_counter()

    def fail(self, status: str, message: str) -> None:
        self.status = status
        self.error = message[:500]

    def relative_to(self, t0: float) -> None:
        """Turn the perf_counter times taken during the run into seconds since ``t0``."""
        self.start -= t0
        self.end -= t0
        if self.first_token is not None:
            self.first_token -= t0
        if self.ack is not None:
            self.ack -= t0
        if self.scheduled is not None:
            self.scheduled -= t0
        for chunk in self.chunks:
            chunk[0] -= t0


def as_dict(record: RequestRecord) -> dict[str, Any]:
    """The record as its JSON object (a plain field copy: dataclasses.asdict deep-copies every chunk, 4x slower)."""
    return {name: getattr(record, name) for name in FIELDS}


def relative_dict(record: RequestRecord, t0: float) -> dict[str, Any]:
    """The JSON object of a record whose times are still perf_counter values, in seconds since ``t0``."""
    data = as_dict(record)
    for name in TIMES:
        if data[name] is not None:
            data[name] -= t0
    data["chunks"] = [[when - t0, count] for when, count in record.chunks]
    return data


def write_records(records: Iterable[RequestRecord], path: Path) -> None:
    with path.open("a", encoding="utf-8") as file:
        for record in records:
            file.write(json.dumps(as_dict(record), separators=(",", ":")) + "\n")


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    for _, record in read_json_lines(path, "records"):
        yield record


FIELDS = tuple(f.name for f in fields(RequestRecord))
TIMES = ("start", "end", "first_token", "ack", "scheduled")  # seconds since the point's t0
