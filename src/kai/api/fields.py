"""Typed access to a raw manifest dict that turns every type mismatch into an `InputError`.

Parsers read fields through a `Reader`, which knows the object's source, kind, name and the path
of the field being read, so the error a user sees names all of them.
"""

from __future__ import annotations

import datetime
import functools
import re
from collections.abc import Mapping
from typing import Any, TypeGuard

from kai.api.errors import InputError, Source

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """A Go-style duration (`90s`, `1h30m`, `-1s`) in seconds; ValueError if malformed."""
    value = text.strip()
    sign = -1.0 if value.startswith("-") else 1.0
    value = value.lstrip("+-")
    if value == "0":
        return 0.0
    pos = 0
    total = 0.0
    for match in _DURATION_PART.finditer(value):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(value) or not value:
        raise ValueError(f'must be a duration such as 90s, 10m or 2h, got "{text}"')
    return sign * total


def parse_timestamp(text: str) -> float:
    """An RFC 3339 timestamp as seconds since the epoch (UTC); ValueError if malformed."""
    stamp = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.UTC)
    return stamp.timestamp()


@functools.lru_cache(maxsize=4096)
def format_timestamp(seconds: float) -> str:
    """Seconds since the epoch as RFC 3339 UTC with a `Z`, as Kubernetes prints them (remembered: the
    objects of one input are mostly created at the same few instants)."""
    stamp = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    if stamp.microsecond:
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def is_mapping(value: object) -> TypeGuard[Mapping[Any, Any]]:
    """A mapping (decoded documents hold plain dicts: those are told apart without the ABC machinery,
    which costs more than the rest of reading a field)."""
    return type(value) is dict or isinstance(value, Mapping)


class Reader:
    """Reads fields of one mapping inside one object; `path` is the dotted path to the mapping."""

    __slots__ = ("kind", "name", "path", "raw", "source")

    def __init__(self, raw: Mapping[str, Any], *, source: Source | None, kind: str, name: str, path: str = "") -> None:
        self.raw = raw
        self.source = source
        self.kind = kind
        self.name = name
        self.path = path

    def field(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, problem: str) -> InputError:
        return InputError(
            source=self.source,
            kind=self.kind,
            name=self.name,
            field=self.field(key) if key else self.path,
            problem=problem,
        )

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def child(self, key: str) -> Reader:
        """The nested mapping at `key` (an empty one if absent)."""
        value = self.raw.get(key)
        if value is None:
            value = {}
        if not is_mapping(value):
            raise self.error(key, f"must be a mapping, got {_show(value)}")
        return Reader(value, source=self.source, kind=self.kind, name=self.name, path=self.field(key))

    def children(self, key: str) -> list[Reader]:
        """The list of mappings at `key` (empty if absent)."""
        out = []
        for i, item in enumerate(self.sequence(key)):
            if not is_mapping(item):
                raise self.error(f"{key}[{i}]", f"must be a mapping, got {_show(item)}")
            out.append(Reader(item, source=self.source, kind=self.kind, name=self.name, path=f"{self.field(key)}[{i}]"))
        return out

    def sequence(self, key: str) -> list[Any]:
        value = self.raw.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(key, f"must be a list, got {_show(value)}")
        return value

    def text(self, key: str, default: str = "") -> str:
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.error(key, f"must be a string, got {_show(value)}")
        return str(value)

    def integer(self, key: str, default: int, *, minimum: int | None = None) -> int:
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, got {_show(value)}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be an integer >= {minimum}, got {value}")
        return value

    def number(self, key: str, default: float, *, problem: str = "must be a number") -> float:
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                raise self.error(key, f"{problem}, got {_show(value)}") from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"{problem}, got {_show(value)}")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {_show(value)}")
        return value

    def string_map(self, key: str) -> dict[str, str]:
        value = self.raw.get(key)
        if value is None:
            return {}
        if not is_mapping(value):
            raise self.error(key, f"must be a mapping of strings, got {_show(value)}")
        out: dict[str, str] = {}
        for k, v in value.items():
            if v is None:
                v = ""
            if isinstance(v, bool):
                v = "true" if v else "false"
            if not isinstance(v, str | int | float):
                raise self.error(f"{key}.{k}", f"must be a string, got {_show(v)}")
            out[str(k)] = str(v)
        return out

    def duration(self, key: str) -> float | None:
        value = self.raw.get(key)
        if value is None:
            return None
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            raise self.error(key, str(exc)) from None

    def timestamp(self, key: str) -> float | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, datetime.datetime):  # YAML may already have parsed it
            if value.tzinfo is None:
                value = value.replace(tzinfo=datetime.UTC)
            return value.timestamp()
        try:
            return parse_timestamp(str(value))
        except ValueError:
            raise self.error(key, f'must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got "{value}"') from None


def _show(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if is_mapping(value):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)
