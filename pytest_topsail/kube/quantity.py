"""Kubernetes resource quantities, the one parser of the package: the simulator's API checks and exact arithmetic
(``read_quantity``, ``Quantity.exact``), its scheduler and profile, the pods no node can hold and the fine-tuning
runner (``parse_quantity``: exact decimals, CPU in millicores, everything else in whole units).

A quantity is a decimal number, then an exponent (``1e3``) or a suffix (``500m``, ``64Gi``). The apiserver takes one
or the other (``Quantity.canonical``); the client helpers also take both (``1e3m``) and surrounding blanks. A number
whose decimal exponent is beyond 64 either way (``1e999999999``, 80 digits) is refused: exact arithmetic on it would
not end, and no resource comes near it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction

MAX_EXPONENT = 64
_PARTS = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][+-]?[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?")
_SUFFIX = {
    "": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal("1e3"),
    "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_EXACT_SUFFIX = {suffix: Fraction(scale) for suffix, scale in _SUFFIX.items()}


class QuantityRangeError(ValueError):
    """A well-formed quantity whose exponent is beyond ``MAX_EXPONENT``."""


@dataclass(frozen=True)
class Quantity:
    number: Decimal  # the number as written, exponent included ("1.5e3" -> 1.5E+3)
    suffix: str  # "" when none
    canonical: bool  # in the apiserver's syntax: an exponent or a suffix, not both

    @property
    def value(self) -> Decimal:
        return self.number * _SUFFIX[self.suffix]

    @property
    def exact(self) -> Fraction:
        return Fraction(self.number) * _EXACT_SUFFIX[self.suffix]


@functools.lru_cache(maxsize=4096)  # the same few quantities ("50m", "1Gi") come with every pod
def read_quantity(text: str) -> Quantity:
    """The parts of a quantity's text; ValueError naming the text when malformed, ``QuantityRangeError`` when its
    exponent is beyond 64."""
    match = _PARTS.fullmatch(text)
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    mantissa, exponent, suffix = match.group(1), match.group(2) or "", match.group(3) or ""
    number = Decimal(mantissa + exponent)
    if abs(number.adjusted()) > MAX_EXPONENT:
        raise QuantityRangeError(f"not a Kubernetes quantity: {text!r} (out of range)")
    return Quantity(number, suffix, not (exponent and suffix))


def parse_quantity(value: str | int | float) -> Decimal:
    """The number a Kubernetes quantity ("500m", "64Gi", "1.5", 2) stands for; ValueError naming it when
    malformed."""
    if isinstance(value, bool):
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    try:
        return read_quantity(str(value).strip()).value
    except QuantityRangeError:
        raise QuantityRangeError(f"not a Kubernetes quantity: {value!r} (out of range)") from None
    except ValueError:
        raise ValueError(f"not a Kubernetes quantity: {value!r}") from None


def parse_cpu_millis(value: str | int | float) -> int:
    """Millicores, rounded up as the scheduler counts them ("1.0001" is 1001m)."""
    return int((parse_quantity(value) * 1000).to_integral_value(rounding=ROUND_CEILING))


def parse_memory_bytes(value: str | int | float) -> int:
    return int(parse_quantity(value).to_integral_value(rounding=ROUND_CEILING))
