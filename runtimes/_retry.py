"""Bounded retries with exponential backoff and full jitter, honouring ``retry-after``.

Runtimes translate vendor exceptions into :class:`~skillreach.errors.TransientProbeError` (worth a
retry: 429, 529, 5xx, timeouts, dropped connections) or :class:`~skillreach.errors.ProbeFailed` (not
worth one: a 4xx). :func:`retrying` retries the first kind at most ``policy.max_retries`` times and
then raises the last one; the second kind is raised at once. Every wait is reported to ``on_retry``
so a run can show it, and ``sleep`` can be swapped in tests. Every wait is also told to the
process's retry listeners (:func:`watch_retries`): the CLI's progress display counts retries and
rate-limit waits while probing, whatever runtime retried.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from skillreach.errors import ProbeFailed, TransientProbeError

__all__ = ["RetryPolicy", "RetryTally", "is_rate_limit", "retrying", "tell_listeners", "watch_retries"]

T = TypeVar("T")

RetryListener = Callable[[TransientProbeError | None, float], None]
"""``listener(error, wait_s)``: a retry after ``error``, or (``error`` None) a wait of the runtime's own
rate limiter (``runtimes._ratelimit.TokenBucket``: requests or tokens per minute)."""
_listeners: list[RetryListener] = []
_listeners_lock = threading.Lock()
_RATE_LIMIT = re.compile(r"\b(429|529)\b|rate.?limit|overloaded", re.IGNORECASE)


def is_rate_limit(err: TransientProbeError) -> bool:
    """Whether the provider refused for load (HTTP 429 / 529, a rate-limit or overloaded error)."""
    return bool(_RATE_LIMIT.search(err.message))


def tell_listeners(err: TransientProbeError | None, wait: float) -> None:
    """Tell the process's listeners of a wait: a retry after ``err``, or a rate limiter's (``None``)."""
    with _listeners_lock:
        listeners = tuple(_listeners)
    for listener in listeners:
        listener(err, wait)


@contextmanager
def watch_retries(listener: RetryListener) -> Iterator[None]:
    """Call ``listener(error, wait_s)`` before every retry's wait, and every wait of a rate limiter
    (``error`` None), in this process while inside."""
    with _listeners_lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _listeners_lock:
            _listeners.remove(listener)


@dataclass
class RetryTally:
    """A running count of retries, those that waited out a provider's rate limit (429 / 529), the
    seconds waited before them, and the waits of the run's own rate limiter (``requests_per_minute``,
    ``input_tokens_per_minute``)."""

    retries: int = 0
    rate_limited: int = 0
    waited_s: float = 0.0
    throttled: int = 0
    throttled_s: float = 0.0

    def add(self, err: TransientProbeError | None, wait: float) -> None:
        if err is None:
            self.throttled += 1
            self.throttled_s += wait
            return
        self.retries += 1
        self.rate_limited += is_rate_limit(err)
        self.waited_s += wait

    def text(self) -> str:
        plural = "y" if self.retries == 1 else "ies"
        limited = f", {self.rate_limited} rate-limited" if self.rate_limited else ""
        text = f"{self.retries} retr{plural}{limited}"
        if self.retries:
            text += f" ({self.waited_s:.1f} s waited)"
        if self.throttled:
            waits = "wait" if self.throttled == 1 else "waits"
            text += f"; {self.throttled} rate-limit {waits} ({self.throttled_s:.1f} s)"
        return text


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 6
    base_s: float = 0.5
    cap_s: float = 30.0
    max_retry_after_s: float = 120.0
    """A ``retry-after`` above this is clipped (a server asking for hours is not waited out here)."""

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        r = rng or random
        if retry_after is not None and retry_after >= 0:
            # the server said when; add a little jitter so a crowd does not come back at once
            return min(retry_after, self.max_retry_after_s) * (1.0 + 0.1 * r.random())
        ceiling = min(self.cap_s, self.base_s * (2**attempt))
        return ceiling * (0.5 + 0.5 * r.random())


async def retrying(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    classify: Callable[[BaseException], ProbeFailed | None],
    on_retry: Callable[[int, TransientProbeError, float], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Run ``call`` until it succeeds, a non-transient error occurs, or retries run out.

    ``classify`` maps an exception to the project's error (``None``: not ours, re-raise as is).
    """
    attempt = 0
    while True:
        try:
            return await call()
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:
            err = exc if isinstance(exc, ProbeFailed) else classify(exc)
            if err is None:
                raise
            if not isinstance(err, TransientProbeError):
                if err is exc:
                    raise
                raise err from exc
            if attempt >= policy.max_retries:
                final = TransientProbeError(
                    f"{err.message} (gave up after {attempt + 1} attempts)", err.retry_after
                )
                raise final from exc
            wait = policy.delay(attempt, err.retry_after)
            if on_retry is not None:
                on_retry(attempt + 1, err, wait)
            tell_listeners(err, wait)
            await sleep(wait)
            attempt += 1
