"""A token bucket for provider limits: requests per minute and input tokens per minute.

``await bucket.acquire(n)`` waits until ``n`` units are available (a request larger than the whole
bucket waits for a full bucket, then goes). A bucket with ``per_minute=None`` never waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from skillreach.runtimes._retry import tell_listeners

__all__ = ["TokenBucket"]


class TokenBucket:
    def __init__(
        self,
        per_minute: float | None,
        *,
        burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_minute is not None and per_minute <= 0:
            raise ValueError("a rate limit must be positive")
        self.rate = None if per_minute is None else per_minute / 60.0
        self.capacity = float(burst if burst is not None else (per_minute or 0.0))
        self.level = self.capacity
        self._clock = clock
        self._stamp = clock()
        self._lock = asyncio.Lock()
        self.waited_s = 0.0

    def _refill(self) -> None:
        now = self._clock()
        if self.rate is not None:
            self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, n: float = 1.0) -> None:
        if self.rate is None:
            return
        need = min(float(n), self.capacity)
        async with self._lock:  # first come, first served
            self._refill()
            while self.level < need:
                wait = (need - self.level) / self.rate
                self.waited_s += wait
                tell_listeners(None, wait)  # the progress display counts rate-limit waits
                await asyncio.sleep(wait)
                self._refill()
            self.level -= need
