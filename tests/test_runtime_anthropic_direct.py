"""The anthropic runtime's direct request path (issue 16: probing throughput): one shared aiohttp
session with the SDK's headers instead of the SDK's request builder. It must send what the SDK sends and
fail as the SDK fails — the SDK's own path (``direct=False``) is the reference, against the Messages API
stand-in on 127.0.0.1 — and keep its connections alive at concurrency > 1."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest

from skillreach.models import Catalog, Query, Skill
from skillreach.runtimes._retry import RetryPolicy
from skillreach.runtimes.anthropic import AnthropicRuntime, DirectPost, sdk_internals
from skillreach.settings import Settings
from skillreach.study.contract import ProbeOptions, Tracker
from skillreach.study.probe_log import read_probes
from tests.fakes.messages_api import MessagesAPI, ScriptResponder
from tests.helpers import hang
from tests.helpers.live import MODEL, responder
from tests.helpers.world import make_queries, make_skills

pytest.importorskip("aiohttp", reason="the direct path needs anthropic[aiohttp]")

SKILLREACH = Path(sys.executable).parent / "skillreach"
KEY = "sk-direct-test-not-a-secret"
FAST = RetryPolicy(max_retries=2, base_s=0.01, cap_s=0.02)
VOLATILE = {"host", "connection", "content-length"}  # the port; HTTP/1.1's default; the tool ids' size
REQUEST_ID = re.compile(r"req_[0-9a-f]+")
TOOL_IDS = re.compile(r'"(id|tool_use_id)": "toolu_[0-9a-f]+"')


def make_catalog() -> Catalog:
    names = ["pdf", "docx", "xlsx"]
    return Catalog(
        id="t",
        skills=tuple(
            Skill(name=n, description=f"Work with {n} files.", body=f"# {n}\nBODY-{n}") for n in names
        ),
    )


def runtime(base_url: str, **kw: Any) -> AnthropicRuntime:
    kw.setdefault("retry_policy", FAST)
    return AnthropicRuntime(MODEL, base_url=base_url, api_key=KEY, settings=Settings(), **kw)


async def probe(rt: AnthropicRuntime, text: str, expected: str = "pdf") -> Any:
    query = Query(id="q1", text=text, expected_skill=expected)
    return await rt.select(query, make_catalog(), Tracker.for_query(query, ProbeOptions()))


def test_auto_takes_the_direct_path_and_the_sdk_path_stays_reachable() -> None:
    assert runtime("http://127.0.0.1:9").request_path == "direct aiohttp"
    assert runtime("http://127.0.0.1:9", direct=False).request_path == "SDK (aiohttp)"
    assert runtime("http://127.0.0.1:9", http="httpx").request_path == "SDK (httpx)"
    # OAuth credentials refresh inside the SDK: only a static key or token takes the direct path
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url="http://127.0.0.1:9")
    assert sdk_internals(client) is not None
    client._custom_auth = object()
    assert sdk_internals(client) is None


def test_runtimes_share_one_verifying_tls_context() -> None:
    """A study builds a runtime per batch: the certificates are loaded once per process, and
    verification stays on (the SDK's own default)."""
    import ssl

    first, second = runtime("https://127.0.0.1:9"), runtime("https://127.0.0.1:9")
    transports = [rt.client._client._transport for rt in (first, second)]
    assert transports[0].ssl_context is transports[1].ssl_context
    context = transports[0].ssl_context
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


async def test_both_paths_send_the_same_headers_and_bodies() -> None:
    sent: dict[bool, tuple[list[dict[str, str]], list[str]]] = {}
    for direct in (True, False):
        with MessagesAPI(ScriptResponder({"fill": ["docx", "pdf"]}), min_cache_tokens=1) as api:
            rt = runtime(api.base_url, direct=direct)
            first = await probe(rt, "fill the form")
            second = await probe(rt, "fill the form again")
            await rt.aclose()
        assert first.invoked == second.invoked == ["docx", "pdf"]
        assert second.usage.cache_read_input_tokens > 0
        headers = [{k: v for k, v in c.headers.items() if k not in VOLATILE} for c in api.message_requests]
        sent[direct] = (headers, [TOOL_IDS.sub("ID", json.dumps(b)) for b in api.requests])
    assert len(sent[True][1]) == 4
    assert sent[True] == sent[False]
    assert sent[True][0][0]["authorization"] == f"Bearer {KEY}"  # the SDK's auth, as the SDK sends it
    assert sent[True][0][0]["user-agent"].startswith("AsyncAnthropic/Python")


async def _raised(call: Any) -> BaseException:
    try:
        await call()
    except BaseException as exc:
        return exc
    raise AssertionError("no exception")


@pytest.mark.parametrize(
    "fault",
    [
        {"status": 400, "message": "max_tokens: 999999 > 64000, which is the maximum"},
        {"status": 401, "error_type": "authentication_error", "message": "invalid x-api-key"},
        {"status": 404, "message": "model: claude-nope"},
        {"status": 429, "retry_after": 0.25},
        {"status": 500},
        {"status": 529, "message": "Overloaded"},
        {"status": "drop"},
    ],
)
async def test_a_failure_is_the_sdks_exception(fault: dict[str, Any]) -> None:
    body = json.dumps({"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "x"}]})
    with MessagesAPI() as api:
        client = anthropic.AsyncAnthropic(
            api_key=KEY, base_url=api.base_url, max_retries=0, http_client=anthropic.DefaultAioHttpClient()
        )
        internals = sdk_internals(client)
        assert internals is not None
        direct = DirectPost(client, 4, 30.0, internals)
        status = fault.pop("status")
        api.inject(status, **fault)
        ours = await _raised(lambda: direct.post(body.encode()))
        api.inject(status, **fault)
        sdks = await _raised(
            lambda: client.post(
                "/v1/messages",
                content=body.encode(),
                cast_to=bytes,
                options={"headers": {"content-type": "application/json"}, "timeout": 30.0},
            )
        )
        await direct.aclose()
        await client.close()
    assert type(ours) is type(sdks)
    # the stand-in gives every response its own request id, as the API does; the SDK quotes it
    assert REQUEST_ID.sub("req_ID", str(ours)) == REQUEST_ID.sub("req_ID", str(sdks))
    assert getattr(ours, "body", None) == getattr(sdks, "body", None)
    if isinstance(sdks, anthropic.APIStatusError):
        assert isinstance(ours, anthropic.APIStatusError)
        assert ours.status_code == sdks.status_code
        assert ours.response.headers.get("retry-after") == sdks.response.headers.get("retry-after")
    else:
        assert type(ours.__cause__) is type(sdks.__cause__)
    assert KEY not in repr(ours)
    assert KEY not in str(ours)


async def test_outcomes_of_failures_are_the_same_on_both_paths() -> None:
    errors: dict[bool, list[tuple[str | None, int]]] = {}
    for direct in (True, False):
        got: list[tuple[str | None, int]] = []
        with MessagesAPI(ScriptResponder({"x": ["pdf"]})) as api:
            rt = runtime(api.base_url, direct=direct)
            api.inject(400, message="max_tokens: too large")
            api.inject(529, times=3, message="Overloaded")
            api.inject(429, retry_after=0.05)
            api.inject("drop")
            for _ in range(3):
                before = rt.stats.retries
                out = await probe(rt, "x")
                got.append((out.error, rt.stats.retries - before))
            await rt.aclose()
        with MessagesAPI(ScriptResponder({"x": ["pdf"]}), latency=0.6) as slow:
            rt = runtime(slow.base_url, direct=direct, timeout_s=0.1, retry_policy=RetryPolicy(max_retries=0))
            out = await probe(rt, "x")
            got.append((out.error, rt.stats.retries))
            await rt.aclose()
        rt = runtime("http://127.0.0.1:9", direct=direct)  # nothing listens on the discard port
        out = await probe(rt, "x")
        got.append((out.error, rt.stats.retries))
        await rt.aclose()
        errors[direct] = got
    assert errors[True] == errors[False]
    assert errors[True][0] == ("HTTP 400 invalid_request_error: max_tokens: too large", 0)
    assert errors[True][1][0] is not None
    assert "529" in errors[True][1][0]
    assert errors[True][1][1] == 2
    assert errors[True][2] == (None, 2)  # a 429 and a dropped connection, retried
    assert errors[True][3][0] is not None
    assert "timed out" in errors[True][3][0]
    assert errors[True][4][0] is not None
    assert "connection refused" in errors[True][4][0]
    assert all(KEY not in (e or "") for e, _ in errors[True])


async def test_concurrent_probes_share_a_keep_alive_pool_no_larger_than_the_concurrency() -> None:
    with MessagesAPI(ScriptResponder(default=["pdf"]), latency=0.05) as api:
        server = api._server
        assert server is not None
        accepted: list[object] = []
        process = server.process_request

        def counting(request: Any, address: Any) -> None:  # once per TCP connection accepted
            accepted.append(address)
            process(request, address)

        server.process_request = counting  # type: ignore[method-assign]
        rt = runtime(api.base_url, concurrency=8)
        outs = await asyncio.gather(*(probe(rt, f"x{i}") for i in range(96)))
        await rt.aclose()
    assert [o.error for o in outs] == [None] * 96
    assert all(o.invoked == ["pdf"] for o in outs)
    assert api.max_in_flight == 8
    assert len(api.message_requests) == 96
    assert 1 <= len(accepted) <= 8  # 96 requests on at most 8 connections: kept alive and reused


async def test_a_new_event_loop_gets_a_new_session() -> None:
    with MessagesAPI(ScriptResponder(default=["pdf"])) as api:
        rt = runtime(api.base_url)
        assert (await probe(rt, "x")).error is None

        def other_loop() -> Any:
            return asyncio.run(probe(rt, "y"))

        out = await asyncio.to_thread(other_loop)  # a second loop (a Prefect task in its own loop)
        assert out.error is None
        assert out.invoked == ["pdf"]
        await rt.aclose()
    assert len(api.message_requests) == 2


def test_skillreach_run_probes_through_the_direct_path_at_concurrency_8(tmp_path: Path) -> None:
    """Through the command a user runs: every probe answered, the SDK's headers on every request, the
    key in no file of the study folder and no warning of an unclosed session."""
    make_skills(tmp_path / "skills")
    make_queries(tmp_path / "queries.json")
    with MessagesAPI(responder(), latency=0.02) as api:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "ANTHROPIC_"))}
        env.pop("PREFECT_API_URL", None)
        env.update(
            ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=api.base_url, SKILLREACH_HOME=str(tmp_path / "h")
        )
        out = hang.finish(
            [str(SKILLREACH), "run", "--skills", "skills", "--queries", "queries.json", "--runtime",
             "anthropic", "--model", MODEL, "--concurrency", "8", "--out", "out"],
            limit_s=180,
            cwd=tmp_path,
            env=env,
        )
        calls = api.message_requests
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert "Unclosed" not in out.stderr
    records = read_probes(tmp_path / "out" / "probes.jsonl")
    assert records
    assert all(r.error is None for r in records)
    assert all(r.usage.input_tokens + r.usage.cache_read_input_tokens > 0 for r in records)
    assert all((r.cost_usd or 0) > 0 for r in records)
    assert len(calls) >= len(records)
    for call in calls:
        assert call.headers["authorization"] == f"Bearer {KEY}"
        assert call.headers["user-agent"].startswith("AsyncAnthropic/Python")
        assert "anthropic-version" in call.headers
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in out.stdout + out.stderr
