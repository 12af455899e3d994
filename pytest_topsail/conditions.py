"""Kubernetes status conditions (``status.conditions[]``: type, status, reason, message): the one lookup.

Foundation module: imports nothing of pytest-topsail (the Kubernetes layer, the simulator's controllers, the scale
analysis and the fixtures read conditions through it).
"""

from __future__ import annotations

from typing import Any


def find_condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The condition of type `kind` of `obj` (None when `obj` or the condition is absent)."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind:
            return cond
    return None


def condition_status(obj: dict[str, Any] | None, kind: str) -> str | None:
    """``"True"``, ``"False"``, ``"Unknown"``, or None when the condition is absent."""
    cond = find_condition(obj, kind)
    return None if cond is None else str(cond.get("status"))
