"""A token bucket for provider limits: requests per minute and input tokens per minute.

``await bucket.acquire(n)`` waits until ``n`` units are available (a request larger than the whole
bucket waits for a full bucket, then goes). A bucket with ``per_minute=None`` never waits.

On a task worker (``skillreach worker``) with the limits on the Prefect server, :func:`limiter` hands
the runtimes a :class:`SharedRateLimit` instead: one limit for every machine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from skillreach.runtimes._retry import tell_listeners

__all__ = ["SharedRateLimit", "TokenBucket", "limiter", "set_shared_limits"]


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


class SharedRateLimit:
    """A limit shared by every worker (a Prefect global rate limit, see ``deployments/limits.py``),
    behind the bucket's ``acquire(n)``: ``acquire_slots(k)`` takes ``k`` slots on the server (one call,
    60–200 ms), at least ``slice_`` at a time; what a slice leaves over serves the next requests here.
    A request larger than ``max_slots`` (the server's bucket) takes ``max_slots``, as the bucket does."""

    def __init__(
        self,
        name: str,
        acquire_slots: Callable[[int], Awaitable[None]],
        *,
        per_minute: float,
        slice_: int = 1,
        max_slots: int | None = None,
    ) -> None:
        self.name = name
        self.rate = per_minute / 60.0  # not None: callers check it to skip counting tokens
        self._acquire = acquire_slots
        self.slice = max(1, slice_)
        self.max_slots = max_slots or max(1, int(per_minute) // 10)
        self._have = 0
        self._lock = asyncio.Lock()
        self.calls = 0

    async def acquire(self, n: float = 1.0) -> None:
        need = max(1, min(round(n), self.max_slots))
        async with self._lock:  # first come, first served
            if self._have < need:
                take = min(max(need - self._have, self.slice), self.max_slots)
                await self._acquire(take)
                self.calls += 1
                self._have += take
            self._have -= need


_shared: list[Callable[[str, str, float | None], Any]] = []


def set_shared_limits(factory: Callable[[str, str, float | None], Any] | None) -> None:
    """Install (or with ``None`` remove) the factory of shared limits: ``factory(runtime, kind,
    per_minute)`` returns a limiter, or ``None`` for the in-process bucket. ``skillreach worker`` installs
    it when the Prefect server holds the limits."""
    _shared[:] = [factory] if factory is not None else []


def limiter(runtime: str, kind: str, per_minute: float | None) -> Any:
    """The limiter a runtime uses for ``kind`` (``requests`` or ``input-tokens``): the shared one when a
    worker installed it, else an in-process :class:`TokenBucket`."""
    if _shared:
        shared = _shared[0](runtime, kind, per_minute)
        if shared is not None:
            return shared
    return TokenBucket(per_minute)
