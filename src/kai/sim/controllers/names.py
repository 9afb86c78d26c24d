"""Deterministic stand-ins for the random and hashed parts of Kubernetes object names.

Real controllers draw pod suffixes from `k8s.io/apimachinery/pkg/util/rand` and hash pod
templates with FNV-32a. The simulator must give the same names on every run, so suffixes come
from a seeded SHA-256 counter per scope, and template hashes from FNV-32a over canonical JSON.
Shapes match the real ones: 5-character suffixes over the `generateName` alphabet, and
`pod-template-hash` values made of the digits of a 32-bit hash mapped through that alphabet.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Kubernetes' rand alphabet: no vowels (no words), no confusable characters.
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


class SeededNameSource:
    """A `NameSource` driven by a seed and one counter per (purpose, scope).

    The n-th call for a scope always yields the same answer for the same seed, whatever other
    scopes were asked before. Not thread-safe; one instance per simulation run.
    """

    __slots__ = ("_counters", "_seed")

    def __init__(self, *, seed: str = "kai-sim") -> None:
        self._seed = seed
        self._counters: dict[tuple[str, str], int] = {}

    def _digest(self, *, purpose: str, scope: str) -> bytes:
        key = (purpose, scope)
        count = self._counters.get(key, 0)
        self._counters[key] = count + 1
        material = "\x00".join((self._seed, purpose, scope, str(count)))
        return hashlib.sha256(material.encode()).digest()

    def suffix(self, *, scope: str, length: int = 5) -> str:
        assert 0 < length <= 32, "suffix length must be between 1 and 32"
        digest = self._digest(purpose="suffix", scope=scope)
        return "".join(ALPHABET[byte % len(ALPHABET)] for byte in digest[:length])

    def uid(self, *, scope: str) -> str:
        raw = bytearray(self._digest(purpose="uid", scope=scope)[:16])
        raw[6] = (raw[6] & 0x0F) | 0x40  # version 4, like the API server's random UIDs
        raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
        text = raw.hex()
        return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def fnv32a(data: bytes) -> int:
    """The 32-bit FNV-1a hash (what Kubernetes uses for pod-template-hash)."""
    value = _FNV32_OFFSET
    for byte in data:
        value ^= byte
        value = (value * _FNV32_PRIME) & 0xFFFFFFFF
    return value


def safe_encode(text: str) -> str:
    """Map each character onto the rand alphabet, as `rand.SafeEncodeString` does."""
    return "".join(ALPHABET[ord(char) % len(ALPHABET)] for char in text)


def canonical_json(value: Any) -> str:
    """Key-sorted, whitespace-free JSON: equal objects give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def template_hash(template: Any, *, collision_count: int = 0) -> str:
    """A `pod-template-hash`-shaped hash (up to 10 characters) of a pod template."""
    material = canonical_json(template)
    if collision_count:
        material += str(collision_count)
    return safe_encode(str(fnv32a(material.encode())))


def sha1_hex(text: str) -> str:
    """40-character SHA-1 hex digest (JobSet job keys, LWS group keys)."""
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()
