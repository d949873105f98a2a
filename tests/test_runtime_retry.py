"""skillreach.runtimes._retry and runtimes._ratelimit: bounded, observable, honouring retry-after."""

from __future__ import annotations

import random
import time

import pytest

from skillreach.errors import ProbeFailed, TransientProbeError
from skillreach.runtimes._ratelimit import TokenBucket
from skillreach.runtimes._retry import RetryPolicy, retrying


def test_delay_is_exponential_jittered_capped_and_honours_retry_after() -> None:
    policy = RetryPolicy(max_retries=10, base_s=0.5, cap_s=4.0, max_retry_after_s=60)
    rng = random.Random(1)
    for attempt in range(10):
        d = policy.delay(attempt, None, rng)
        ceiling = min(4.0, 0.5 * 2**attempt)
        assert ceiling / 2 <= d <= ceiling
    assert 3.0 <= policy.delay(0, 3.0, rng) <= 3.3
    assert policy.delay(0, 3600, rng) <= 66  # a huge retry-after is clipped


async def test_retrying_counts_and_gives_up() -> None:
    waits: list[float] = []
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise TransientProbeError("HTTP 529", retry_after=0.2 * calls)
        return "ok"

    async def fake_sleep(s: float) -> None:
        waits.append(s)

    seen: list[int] = []
    result = await retrying(
        flaky,
        policy=RetryPolicy(max_retries=5),
        classify=lambda e: None,
        sleep=fake_sleep,
        on_retry=lambda n, e, w: seen.append(n),
    )
    assert result == "ok"
    assert seen == [1, 2]
    assert 0.2 <= waits[0] <= 0.22
    assert 0.4 <= waits[1] <= 0.44

    async def always() -> str:
        raise TransientProbeError("HTTP 500 api_error: boom")

    with pytest.raises(TransientProbeError, match=r"gave up after 3 attempts"):
        await retrying(always, policy=RetryPolicy(max_retries=2), classify=lambda e: None, sleep=fake_sleep)


async def test_a_final_error_is_not_retried_and_unknown_errors_pass_through() -> None:
    calls = 0

    async def bad() -> None:
        nonlocal calls
        calls += 1
        raise ValueError("400")

    with pytest.raises(ProbeFailed, match="HTTP 400"):
        await retrying(
            bad, policy=RetryPolicy(), classify=lambda e: ProbeFailed("HTTP 400 invalid_request_error")
        )
    assert calls == 1
    with pytest.raises(ValueError, match="400"):
        await retrying(bad, policy=RetryPolicy(), classify=lambda e: None)


async def test_token_bucket_paces_after_the_burst() -> None:
    bucket = TokenBucket(600, burst=2)  # 10 a second once the 2-token burst is spent
    t0 = time.perf_counter()
    for _ in range(5):
        await bucket.acquire(1)
    elapsed = time.perf_counter() - t0
    assert 0.25 <= elapsed < 1.0
    unlimited = TokenBucket(None)
    await unlimited.acquire(10**9)
    with pytest.raises(ValueError, match="positive"):
        TokenBucket(0)
