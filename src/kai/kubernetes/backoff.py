"""Capped exponential backoff with jitter, shared by the informers, the writer and leader election.

Every retry loop against the API server waits the same way: the delay doubles from `initial` up to
`maximum`, and each wait is stretched by a random factor in `[1, 1 + jitter]` so that many clients
that failed together do not come back together.
"""

from __future__ import annotations

import random

import msgspec


class Backoff(msgspec.Struct, frozen=True, kw_only=True):
    """How long to wait before retry number `attempt` (1 for the first retry)."""

    initial: float = 0.8
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.maximum < self.initial or self.factor < 1 or self.jitter < 0:
            raise ValueError(f"invalid backoff {self}")

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry `attempt` (>= 1): capped exponential, then jittered."""
        base = min(self.maximum, self.initial * self.factor ** max(0, attempt - 1))
        draw = (rng or random).random()
        return base * (1.0 + self.jitter * draw)
