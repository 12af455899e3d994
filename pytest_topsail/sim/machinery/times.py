"""Timestamps as the API writes them: ``format_time`` (metav1.Time, RFC 3339 in whole seconds) and
``format_micro_time`` (metav1.MicroTime, with microseconds), both in UTC."""

from __future__ import annotations

import functools
from datetime import UTC, datetime


def format_time(epoch: float) -> str:
    """RFC 3339 with whole seconds, as metav1.Time."""
    return _format_second(int(epoch // 1))


@functools.lru_cache(maxsize=16)  # thousands of objects are stamped within one second
def _format_second(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(epoch: float) -> str:
    """RFC 3339 with microseconds, as metav1.MicroTime."""
    second = int(epoch // 1)
    micro = round((epoch - second) * 1e6)
    if micro == 1_000_000:  # rounded up into the next second, as datetime does
        second, micro = second + 1, 0
    return f"{_format_second(second)[:-1]}.{micro:06d}Z"
