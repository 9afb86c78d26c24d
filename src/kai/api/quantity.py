"""Kubernetes resource quantities (`500m`, `2Gi`, `1e3`, `0.5`) parsed exactly.

Quantities are parsed with `decimal.Decimal` so that `0.1` CPU is exactly 100 millicores and
`1Gi` exactly 2**30 bytes; the float handed to the core is the nearest double of the exact value.
"""

from __future__ import annotations

import decimal
import functools
import re

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": decimal.Decimal("1e-9"),
    "u": decimal.Decimal("1e-6"),
    "m": decimal.Decimal("1e-3"),
    "": decimal.Decimal(1),
    "k": decimal.Decimal("1e3"),
    "M": decimal.Decimal("1e6"),
    "G": decimal.Decimal("1e9"),
    "T": decimal.Decimal("1e12"),
    "P": decimal.Decimal("1e15"),
    "E": decimal.Decimal("1e18"),
}
_PATTERN = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: object) -> decimal.Decimal:
    """The exact value of a Kubernetes quantity given as a string or a YAML number."""
    if isinstance(value, bool):
        raise QuantityError(f"must be a quantity such as 500m, 2Gi or 4, got {value!r}")
    if isinstance(value, int):
        return decimal.Decimal(value)
    if isinstance(value, float):
        return decimal.Decimal(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"must be a quantity such as 500m, 2Gi or 4, got {value!r}")
    return _parse_text(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> decimal.Decimal:
    """A quantity written as text; remembered, since a cluster writes the same few over and over."""
    match = _PATTERN.match(value.strip())
    if match is None:
        raise QuantityError(f'must be a quantity such as 500m, 2Gi or 4, got "{value}"')
    number = decimal.Decimal(match.group("num"))
    if match.group("exp"):
        return number * decimal.Decimal(10) ** int(match.group("exp")[1:])
    suffix = match.group("suffix") or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def cpu_millis(value: object) -> float:
    """A CPU quantity in millicores."""
    return float(parse_quantity(value) * 1000)


def amount(value: object) -> float:
    """A quantity in its base unit (bytes for memory, devices for GPUs, a count for pods)."""
    return float(parse_quantity(value))
