"""OpenAPI documents for kubectl (filled in below)."""

from __future__ import annotations

from typing import Any


def document(store: Any, path: str, server_address: str) -> dict[str, Any] | None:
    return None
