"""Kubernetes resource quantities, the one parser of the package (the simulator's scheduler and profile, the pods
no node can hold, the fine-tuning runner): exact decimals, CPU in millicores, everything else in whole units."""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
# Exact arithmetic on "1e999999999" would not end (and no resource comes near 1e64): such exponents are refused.
MAX_EXPONENT = 64
_SUFFIX = {
    None: Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal("1e3"),
    "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


def parse_quantity(value: str | int | float) -> Decimal:
    """The number a Kubernetes quantity ("500m", "64Gi", "1.5", 2) stands for; ValueError when malformed."""
    if isinstance(value, bool):
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    try:
        number = Decimal(match.group(1))
        if abs(number.adjusted()) > MAX_EXPONENT:
            raise ValueError(f"not a Kubernetes quantity: {value!r} (out of range)")
        return number * _SUFFIX[match.group(2)]
    except ArithmeticError:  # decimal's InvalidOperation ("1.2.3") and Overflow
        raise ValueError(f"not a Kubernetes quantity: {value!r}") from None


def parse_cpu_millis(value: str | int | float) -> int:
    """Millicores, rounded up as the scheduler counts them ("1.0001" is 1001m)."""
    return int((parse_quantity(value) * 1000).to_integral_value(rounding=ROUND_CEILING))


def parse_memory_bytes(value: str | int | float) -> int:
    return int(parse_quantity(value).to_integral_value(rounding=ROUND_CEILING))
