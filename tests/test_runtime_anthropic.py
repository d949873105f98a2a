"""The anthropic runtime against the Messages API stand-in (a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Checks, Query, QueryKind, Skill
from skillreach.runtimes._retry import RetryPolicy
from skillreach.runtimes.anthropic import AnthropicRuntime
from skillreach.settings import Settings
from skillreach.study.contract import ProbeOptions, Tracker
from tests.fakes.messages_api import MessagesAPI, Reply, ScriptResponder, skill_call, text_reply

FAST = RetryPolicy(max_retries=3, base_s=0.01, cap_s=0.05)


def make_catalog(n: int = 4) -> Catalog:
    names = ["pdf", "docx", "xlsx", "pptx", "rollback", "deploy"][:n]
    return Catalog(
        id="t",
        skills=tuple(
            Skill(name=nm, description=f"Work with {nm} things.", body=f"# {nm}\nBODY-OF-{nm.upper()}-XYZ")
            for nm in names
        ),
    )


def runtime(api: MessagesAPI, **kw: object) -> AnthropicRuntime:
    kw.setdefault("retry_policy", FAST)
    return AnthropicRuntime(
        "claude-sonnet-4-6",
        base_url=api.base_url,
        api_key="sk-test",
        settings=Settings(),
        **kw,  # type: ignore[arg-type]
    )


def q(text: str, expected: str | None = "pdf", acceptable: tuple[str, ...] = (), **kw: object) -> Query:
    kind = QueryKind.implicit if expected else QueryKind.out_of_scope
    return Query(id="q1", text=text, expected_skill=expected, acceptable_skills=acceptable, kind=kind, **kw)  # type: ignore[arg-type]


async def probe(rt: AnthropicRuntime, query: Query, catalog: Catalog, **opts: object):  # type: ignore[no-untyped-def]
    options = ProbeOptions(**opts)  # type: ignore[arg-type]
    tracker = Tracker.for_query(query, options)
    return await rt.select(query, catalog, tracker), tracker


async def test_progressive_disclosure_and_early_exit() -> None:
    cat = make_catalog()
    with MessagesAPI(ScriptResponder({"fill the form": ["docx", "pdf", "xlsx"]})) as api:
        rt = runtime(api)
        out, _ = await probe(rt, q("please fill the form"), cat)
        await rt.aclose()
    assert out.error is None
    assert out.invoked == ["docx", "pdf"]
    assert out.early_exit is True
    # early exit: no request after the target was invoked (2 requests, not 3)
    assert len(api.requests) == 2
    first, second = (json.dumps(b) for b in api.requests)
    # progressive disclosure: no body before its invocation; docx's body only after docx was invoked
    for marker in ("BODY-OF-PDF-XYZ", "BODY-OF-DOCX-XYZ", "BODY-OF-XLSX-XYZ"):
        assert marker not in first
    assert "BODY-OF-DOCX-XYZ" in second
    assert "BODY-OF-PDF-XYZ" not in second
    assert "BODY-OF-XLSX-XYZ" not in second
    # the listing has every name and description, one tool named Skill
    tools = api.requests[0]["tools"]
    assert [t["name"] for t in tools] == ["Skill"]
    for s in cat.skills:
        assert f"- {s.name}: {s.description}" in tools[0]["description"]
    assert out.resolved_model == "claude-sonnet-4-6-20260115"
    assert out.turns == 2


async def test_prompt_cache_prefix_and_usage() -> None:
    cat = Catalog(
        id="big",
        skills=tuple(Skill(name=f"s{i}", description="does a thing " * 20, body="b") for i in range(30)),
    )
    with MessagesAPI(ScriptResponder(default=["s3"])) as api:
        rt = runtime(api)
        a, _ = await probe(rt, q("one", expected="s3"), cat)
        b, _ = await probe(rt, q("two", expected="s3"), cat)
        await rt.aclose()
    body = api.requests[0]
    assert body["tools"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert a.usage.cache_creation_input_tokens > 1024
    assert a.usage.cache_read_input_tokens == 0
    assert b.usage.cache_read_input_tokens == a.usage.cache_creation_input_tokens
    assert b.usage.cache_creation_input_tokens == 0
    # cost from the price table: claude-sonnet-4 prices
    p = Settings().price_for("claude-sonnet-4-6-20260115")
    assert p is not None
    expected = (
        b.usage.input_tokens * p.input
        + b.usage.output_tokens * p.output
        + b.usage.cache_read_input_tokens * p.cache_read
    ) / 1e6
    assert b.cost_usd == pytest.approx(expected)


async def test_max_turns_and_acceptable_skills_consume_turns() -> None:
    cat = make_catalog()
    script = ScriptResponder({"x": ["docx", "xlsx", "pptx", "pdf"]})
    with MessagesAPI(script) as api:
        rt = runtime(api)
        out, tracker = await probe(rt, q("x", acceptable=("docx",)), cat, max_turns=3)
        await rt.aclose()
    # the acceptable docx used a turn: three reads, the target never reached, no fourth request
    assert out.invoked == ["docx", "xlsx", "pptx"]
    assert tracker.exhausted
    assert not out.early_exit
    assert len(api.requests) == 3


async def test_model_stops_calling_skill() -> None:
    cat = make_catalog()
    with MessagesAPI(ScriptResponder({"hello": [None]})) as api:
        rt = runtime(api)
        out, _ = await probe(rt, q("hello there", expected=None), cat)
        await rt.aclose()
    assert out.invoked == []
    assert out.error is None
    assert out.turns == 1


async def test_unknown_skill_is_not_an_invocation() -> None:
    cat = make_catalog()
    with MessagesAPI(ScriptResponder({"x": ["nonexistent", "pdf"]})) as api:
        rt = runtime(api)
        out, _ = await probe(rt, q("x"), cat)
        await rt.aclose()
    assert out.invoked == ["pdf"]
    result = api.requests[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert "Unknown skill" in result["content"]


async def test_retries_after_injected_faults_honouring_retry_after() -> None:
    cat = make_catalog()
    with MessagesAPI(ScriptResponder({"x": ["pdf"]})) as api:
        api.inject(429, retry_after=0.3)
        api.inject(529)
        api.inject(500)
        api.inject("drop")
        rt = runtime(api, retry_policy=RetryPolicy(max_retries=5, base_s=0.01, cap_s=0.02))
        t0 = time.perf_counter()
        out, _ = await probe(rt, q("x"), cat)
        elapsed = time.perf_counter() - t0
        await rt.aclose()
    assert out.error is None
    assert out.invoked == ["pdf"]
    assert rt.stats.retries == 4
    statuses = [c.status for c in api.message_requests]
    assert statuses == [429, 529, 500, -1, 200]
    assert elapsed >= 0.3  # the retry-after of the 429 was waited out


async def test_fault_past_retry_budget_is_an_error_not_an_abstention() -> None:
    cat = make_catalog()
    with MessagesAPI(ScriptResponder({"x": ["pdf"]})) as api:
        api.inject(529, times=10, message="Overloaded")
        rt = runtime(api, retry_policy=RetryPolicy(max_retries=2, base_s=0.001, cap_s=0.002))
        out, _ = await probe(rt, q("x"), cat)
        await rt.aclose()
    assert out.error is not None
    assert "529" in out.error
    assert "Overloaded" in out.error
    assert "gave up after 3 attempts" in out.error
    assert len(api.message_requests) == 3


async def test_non_retryable_400_fails_at_once_with_the_api_message() -> None:
    cat = make_catalog()
    with MessagesAPI(ScriptResponder({"x": ["pdf"]})) as api:
        api.inject(400, message="max_tokens: 999999 > 64000, which is the maximum")
        rt = runtime(api)
        out, _ = await probe(rt, q("x"), cat)
        await rt.aclose()
    assert out.error == "HTTP 400 invalid_request_error: max_tokens: 999999 > 64000, which is the maximum"
    assert len(api.message_requests) == 1
    assert rt.stats.retries == 0


async def test_unknown_model_is_a_config_error_before_spending() -> None:
    with MessagesAPI() as api:
        rt = runtime(api)
        assert await rt.resolve_model("claude-haiku-4-5") == "claude-haiku-4-5-20251001"
        with pytest.raises(ConfigError, match="not-a-model"):
            await rt.resolve_model("not-a-model")
        await rt.aclose()
    assert not api.requests


def test_missing_key_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicRuntime("claude-sonnet-4-6")


async def test_concurrency_is_bounded_by_the_semaphore() -> None:
    cat = make_catalog()
    with MessagesAPI(ScriptResponder(default=["pdf"]), latency=0.3) as api:
        rt = runtime(api, concurrency=3)
        await asyncio.gather(*(probe(rt, q(f"x{i}"), cat) for i in range(9)))
        await rt.aclose()
    assert api.max_in_flight == 3


async def test_requests_per_minute_bucket_paces_requests() -> None:
    cat = make_catalog()
    with MessagesAPI(ScriptResponder(default=["pdf"])) as api:
        # 600/min = 10/s with a burst of 600: shrink the burst to 1 to see the pacing
        rt = runtime(api, requests_per_minute=600)
        rt._rpm.capacity = rt._rpm.level = 1.0
        t0 = time.perf_counter()
        await asyncio.gather(*(probe(rt, q(f"x{i}"), cat) for i in range(4)))
        elapsed = time.perf_counter() - t0
        await rt.aclose()
    assert elapsed >= 0.28  # 3 waits of 0.1 s


async def test_compliance_mode_records_tool_calls_and_final_text() -> None:
    cat = make_catalog()
    checks = Checks(tool_results={r"make preflight": "all 12 checks passed"})
    script = ScriptResponder(
        {
            "ship it": [
                "pdf",
                [{"tool": "Bash", "input": {"command": "make preflight"}}],
                {"tool": "Read", "input": {"file_path": "README.md"}},
                {"text": "Shipped after preflight."},
            ]
        }
    )
    with MessagesAPI(script) as api:
        rt = runtime(api)
        out, _ = await probe(rt, q("ship it", checks=checks), cat, compliance=True, step_budget=8)
        await rt.aclose()
    assert out.invoked == ["pdf"]
    assert [c.tool for c in out.tool_calls] == ["Bash", "Read"]
    assert out.tool_calls[0].input == {"command": "make preflight"}
    assert out.final_text == "Shipped after preflight."
    # the canned result came back for the matching call, "ok" for the other
    results = list(api.requests[3]["messages"][-1]["content"])
    assert results[0]["content"] == "ok"
    earlier = api.requests[2]["messages"][-1]["content"][0]
    assert earlier["content"] == "all 12 checks passed"
    # tools were offered only after the skill was loaded
    assert [t["name"] for t in api.requests[0]["tools"]] == ["Skill"]
    assert {t["name"] for t in api.requests[1]["tools"]} == {"Skill", "Bash", "Read", "Write", "Edit"}


async def test_compliance_step_budget() -> None:
    cat = make_catalog()
    loop_forever = [{"tool": "Bash", "input": {"command": f"echo {i}"}} for i in range(50)]
    with MessagesAPI(ScriptResponder({"go": ["pdf", *loop_forever]})) as api:
        rt = runtime(api)
        out, _ = await probe(rt, q("go"), cat, compliance=True, step_budget=3)
        await rt.aclose()
    assert len(api.requests) == 1 + 3
    assert len(out.tool_calls) == 3


async def test_batch_mode_one_batch_per_turn() -> None:
    cat = make_catalog()
    script = ScriptResponder(
        {"a-": ["pdf"], "b-": ["docx", "pdf"], "c-": [None], "d-": ["docx", "xlsx", "pdf"]}
    )
    with MessagesAPI(script, batch_polls=2) as api:
        rt = runtime(api, batch=True, poll_initial_s=0.01, poll_max_s=0.02)
        queries = [q(f"{p}query") for p in ("a-", "b-", "c-", "d-")]
        outs = await asyncio.gather(*(probe(rt, qq, cat, max_turns=3) for qq in queries))
        await rt.aclose()
    invoked = [o.invoked for o, _ in outs]
    assert invoked == [["pdf"], ["docx", "pdf"], [], ["docx", "xlsx", "pdf"]]
    sizes = [len(b["requests"]) for b in api.batches.values()]
    assert sizes == [4, 2, 1]  # turn 1 of all, then the probes still going
    assert not api.message_requests  # nothing outside the batches
    # half price in batch mode
    a = outs[0][0]
    assert a.cost_usd is not None
    assert a.resolved_model == "claude-sonnet-4-6-20260115"
    p = Settings().price_for(a.resolved_model)
    assert p is not None
    base = (a.usage.input_tokens * p.input + a.usage.output_tokens * p.output) / 1e6
    assert a.cost_usd == pytest.approx(base / 2)


async def test_batch_errored_request_is_retried_in_the_next_batch() -> None:
    cat = make_catalog()
    with MessagesAPI(ScriptResponder(default=["pdf"]), batch_polls=0) as api:
        api.batch_errors["r0"] = ("overloaded_error", "Overloaded")
        rt = runtime(api, batch=True, poll_initial_s=0.01)
        outs = await asyncio.gather(*(probe(rt, q(f"x{i}"), cat) for i in range(2)))
        await rt.aclose()
    assert all(o.invoked == ["pdf"] and o.error is None for o, _ in outs)
    assert [len(b["requests"]) for b in api.batches.values()] == [2, 1]


def test_stand_in_reply_helpers() -> None:
    r = text_reply("hi")
    assert r.stop_reason == "end_turn"
    assert skill_call("pdf")["input"] == {"skill": "pdf"}
    assert Reply([]).content == []


async def test_run_probes_in_batch_mode_puts_every_probe_of_the_slice_in_one_batch() -> None:
    from skillreach.study.runner import ListSink, run_probes

    cat = make_catalog()
    with MessagesAPI(ScriptResponder(default=["pdf"]), batch_polls=0) as api:
        rt = runtime(api, batch=True, poll_initial_s=0.01)
        queries = [Query(id=f"q{i}", text=f"query {i}", expected_skill="pdf") for i in range(6)]
        sink = ListSink()
        await run_probes(
            rt,
            cat,
            [(qq, 1) for qq in queries],
            options=ProbeOptions(),
            sink=sink,
            concurrency=2,
            fingerprint="f",
        )
        await rt.aclose()
    assert [len(b["requests"]) for b in api.batches.values()] == [6]
    assert all(r.invoked == ("pdf",) for r in sink.records)


async def test_canary_against_a_model_that_never_calls_skill_is_blind() -> None:
    from skillreach.errors import HarnessBlind
    from skillreach.study.runner import canary_check

    with MessagesAPI(ScriptResponder(default=[{"text": "I will just answer."}])) as api:
        rt = runtime(api)
        with pytest.raises(HarnessBlind, match="cannot see activations"):
            await canary_check(rt, make_catalog(), ProbeOptions())
        await rt.aclose()
    assert len(api.requests) == 3


async def test_both_sdk_transports_send_the_same_requests() -> None:
    pytest.importorskip("aiohttp", reason="anthropic[aiohttp] is not installed")
    cat = make_catalog()
    bodies: dict[str, list[dict[str, object]]] = {}
    for http in ("httpx", "aiohttp"):
        with MessagesAPI(ScriptResponder({"fill": ["docx", "pdf"]}), min_cache_tokens=1) as api:
            rt = runtime(api, http=http)
            assert rt.http == http
            out, _ = await probe(rt, q("fill the form"), cat)
            out2, _ = await probe(rt, q("fill the form again"), cat)  # the listing's bytes are reused
            await rt.aclose()
        assert out.invoked == out2.invoked == ["docx", "pdf"]
        assert out2.usage.cache_read_input_tokens > 0
        bodies[http] = api.requests
    assert len(bodies["httpx"]) == 4
    # the same bodies but for the stand-in's random tool_use ids
    ids = re.compile(r'"(id|tool_use_id)": "toolu_[0-9a-f]+"')
    assert [ids.sub("ID", json.dumps(b)) for b in bodies["httpx"]] == [
        ids.sub("ID", json.dumps(b)) for b in bodies["aiohttp"]
    ]
    assert all(call.headers.get("content-type") == "application/json" for call in api.calls)


def test_unknown_transport_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="http must be"):
        AnthropicRuntime("claude-sonnet-4-6", api_key="sk-test", http="curl")
