"""The progress display of ``skillreach run`` counts retries and rate-limit waits while probing
(issue 19), whatever runtime retried: ``runtimes._retry.retrying`` tells the process's listeners
(``watch_retries``) before every wait."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from skillreach.errors import ProbeFailed, TransientProbeError
from skillreach.runtimes._retry import RetryPolicy, RetryTally, is_rate_limit, retrying, watch_retries
from tests.fakes.messages_api import MessagesAPI
from tests.helpers import hang
from tests.helpers.live import MODEL, responder
from tests.helpers.world import make_queries, make_skills

SKILLREACH = Path(sys.executable).parent / "skillreach"


def test_skillreach_run_shows_the_retries_of_a_provider_answering_429_and_529(tmp_path: Path) -> None:
    make_skills(tmp_path / "skills")
    make_queries(tmp_path / "queries.json")
    with MessagesAPI(responder()) as api:
        api.inject(429, times=3, retry_after=0.01)
        api.inject(529, times=2, retry_after=0.01)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "ANTHROPIC_"))}
        env.pop("PREFECT_API_URL", None)
        env.update(ANTHROPIC_API_KEY="sk-test-not-a-secret", ANTHROPIC_BASE_URL=api.base_url,
                   SKILLREACH_HOME=str(tmp_path / "home"))
        out = hang.finish(
            [str(SKILLREACH), "run", "--skills", "skills", "--queries", "queries.json", "--runtime",
             "anthropic", "--model", MODEL, "--out", "out"],
            limit_s=120,
            cwd=tmp_path,
            env=env,
        )
        statuses = [c.status for c in api.calls if c.path.startswith("/v1/messages")]
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert statuses.count(429) == 3
    assert statuses.count(529) == 2
    bar = [line for line in out.stderr.splitlines() if line.startswith("probing")]
    assert len(bar) == 1, out.stderr
    assert "13/13" in bar[0]
    assert re.search(r"0 errors 5 retries, 5 rate-limited \(\d+\.\d s waited\)", bar[0]), bar[0]


def test_a_run_without_retries_says_so(tmp_path: Path) -> None:
    make_skills(tmp_path / "skills")
    make_queries(tmp_path / "queries.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLREACH_")}
    env.pop("PREFECT_API_URL", None)
    env["SKILLREACH_HOME"] = str(tmp_path / "home")
    out = hang.finish(
        [str(SKILLREACH), "run", "--skills", "skills", "--queries", "queries.json", "--out", "out"],
        limit_s=120,
        cwd=tmp_path,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    bar = [line for line in out.stderr.splitlines() if line.startswith("probing")]
    assert len(bar) == 1, out.stderr
    assert "0 errors 0 retries" in bar[0]


def test_listeners_hear_every_retry_before_its_wait_and_only_while_watching() -> None:
    """The count runs: a listener hears retry k before the k-th wait, not at the end."""
    errors = [TransientProbeError("HTTP 429 rate_limit_error: slow down", 0.5),
              TransientProbeError("connection failed (ConnectError) to http://127.0.0.1:9"),
              TransientProbeError("HTTP 529 overloaded_error: busy", 0.25)]
    heard: list[tuple[str, float]] = []
    slept: list[tuple[float, int]] = []
    tally = RetryTally()

    def hear(err: TransientProbeError, wait: float) -> None:
        heard.append((err.message, wait))
        tally.add(err, wait)

    async def sleep(s: float) -> None:
        slept.append((s, len(heard)))

    calls = iter([*errors, None])

    async def call() -> str:
        err = next(calls)
        if err is not None:
            raise err
        return "done"

    def classify(exc: BaseException) -> ProbeFailed | None:
        return exc if isinstance(exc, ProbeFailed) else None

    policy = RetryPolicy(max_retries=5, base_s=0.1, cap_s=0.1)
    with watch_retries(hear):
        assert asyncio.run(retrying(call, policy=policy, classify=classify, sleep=sleep)) == "done"
    assert [m for m, _ in heard] == [e.message for e in errors]
    assert [n for _, n in slept] == [1, 2, 3]  # each wait after its retry was heard
    assert [w for _, w in heard] == [s for s, _ in slept]
    assert tally.retries == 3
    assert tally.rate_limited == 2
    assert tally.text().startswith("3 retries, 2 rate-limited (")
    assert not is_rate_limit(errors[1])

    calls = iter([errors[0], None])
    asyncio.run(retrying(call, policy=policy, classify=classify, sleep=sleep))
    assert len(heard) == 3  # no longer watching
    assert RetryTally().text() == "0 retries"


def test_the_rate_limiters_own_waits_are_counted_too() -> None:
    """``requests_per_minute`` / ``input_tokens_per_minute`` throttle in the runtime's token bucket:
    each wait reaches the listeners (error ``None``) and the progress line counts them apart."""
    from skillreach.runtimes._ratelimit import TokenBucket

    heard: list[tuple[TransientProbeError | None, float]] = []
    tally = RetryTally()

    def hear(err: TransientProbeError | None, wait: float) -> None:
        heard.append((err, wait))
        tally.add(err, wait)

    async def three() -> None:
        bucket = TokenBucket(1200, burst=1)  # 20 a second, one at a time
        for _ in range(3):
            await bucket.acquire(1)

    with watch_retries(hear):
        asyncio.run(three())
    assert len(heard) == 2  # the first request goes at once, the next two wait
    assert all(err is None and 0 < wait <= 0.06 for err, wait in heard)
    assert (tally.retries, tally.throttled) == (0, 2)
    assert re.fullmatch(r"0 retries; 2 rate-limit waits \(0\.\d s\)", tally.text()), tally.text()
    tally.add(TransientProbeError("HTTP 429 rate_limit_error: slow down", 1.0), 1.0)
    both = r"1 retry, 1 rate-limited \(1\.0 s waited\); 2 rate-limit waits \(0\.\d s\)"
    assert re.fullmatch(both, tally.text()), tally.text()
