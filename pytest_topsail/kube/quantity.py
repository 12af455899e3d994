"""Kubernetes resource quantities, as the scheduler counts them: CPU in millicores, everything else in whole units."""

from __future__ import annotations

import re

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_SUFFIX = {
    None: 1, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}


def parse_quantity(value: str | int | float) -> float:
    """The number a Kubernetes quantity ("500m", "64Gi", "1.5", 2) stands for; ValueError when malformed."""
    if isinstance(value, bool):
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    try:
        return float(match.group(1)) * _SUFFIX[match.group(2)]
    except ValueError:
        raise ValueError(f"not a Kubernetes quantity: {value!r}") from None


def parse_cpu_millis(value: str | int | float) -> int:
    millis = parse_quantity(value) * 1000
    return int(millis) if millis == int(millis) else int(millis) + 1


def parse_memory_bytes(value: str | int | float) -> int:
    amount = parse_quantity(value)
    return int(amount) if amount == int(amount) else int(amount) + 1
