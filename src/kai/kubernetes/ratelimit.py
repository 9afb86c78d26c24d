"""The client-side request rate limit (`--kube-api-qps`, `--kube-api-burst`), as client-go applies it.

A token bucket holding up to `burst` tokens, refilled at `qps` per second; every request to the API
server (reads, writes, list pages and watch starts alike) takes one token and waits until one is
there. Waiters are served in arrival order: a caller reserves its token at once (the balance may go
negative) and sleeps for exactly its deficit, so no lock and no polling are needed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    """`qps` tokens per second, at most `burst` saved up; `qps <= 0` means no limit."""

    def __init__(self, *, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if qps > 0 and burst < 1:
            raise ValueError(f"burst must be at least 1 when qps is limited, got {burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._stamp = clock()

    @property
    def limited(self) -> bool:
        return self.qps > 0

    def reserve(self) -> float:
        """Take one token now; return how many seconds the caller must wait before using it."""
        if not self.limited:
            return 0.0
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def acquire(self) -> None:
        """Wait until this caller may send one request."""
        wait = self.reserve()
        if wait <= 0:
            return
        try:
            await asyncio.sleep(wait)
        except asyncio.CancelledError:
            self._tokens = min(float(self.burst), self._tokens + 1.0)  # the request is not sent: give it back
            raise
