"""Bounded retries with exponential backoff and full jitter, honouring ``retry-after``.

Runtimes translate vendor exceptions into :class:`~skillreach.errors.TransientProbeError` (worth a
retry: 429, 529, 5xx, timeouts, dropped connections) or :class:`~skillreach.errors.ProbeFailed` (not
worth one: a 4xx). :func:`retrying` retries the first kind at most ``policy.max_retries`` times and
then raises the last one; the second kind is raised at once. Every wait is reported to ``on_retry``
so a run can show it, and ``sleep`` can be swapped in tests.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from skillreach.errors import ProbeFailed, TransientProbeError

__all__ = ["RetryPolicy", "retrying"]

T = TypeVar("T")


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
            await sleep(wait)
            attempt += 1
