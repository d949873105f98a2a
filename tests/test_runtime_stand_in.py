"""The Messages API stand-in speaks the protocol the SDK expects (other helpers' tests rely on it)."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest

from tests.fakes.messages_api import MessagesAPI, ScriptResponder, count_tokens

TOOLS = [{"name": "Skill", "description": "x" * 8000, "input_schema": {"type": "object"}}]


def client(api: MessagesAPI) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=api.base_url, api_key="sk-test", max_retries=0)


async def test_streaming_event_sequence_and_final_message() -> None:
    with MessagesAPI(ScriptResponder({"fill": ["pdf"]})) as api:
        c = client(api)
        async with c.messages.stream(
            model="claude-sonnet-4-6",
            max_tokens=50,
            tools=TOOLS,
            messages=[{"role": "user", "content": "fill it"}],
        ) as stream:
            kinds = [event.type async for event in stream]
            final = await stream.get_final_message()
        raw = httpx.post(
            f"{api.base_url}/v1/messages",
            headers={"x-api-key": "k"},
            json={
                "model": "claude-sonnet-4-6",
                "max_tokens": 5,
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
        await c.close()
    assert final.content[0].type == "tool_use"
    assert final.content[0].input == {"skill": "pdf"}
    assert final.stop_reason == "tool_use"
    assert "message_start" in kinds
    assert "message_stop" in kinds
    events = [line.split(": ", 1)[1] for line in raw.text.splitlines() if line.startswith("event: ")]
    assert events[0] == "message_start"
    assert events[-2:] == ["message_delta", "message_stop"]
    assert events.count("content_block_start") == events.count("content_block_stop") == 1
    assert raw.headers["content-type"] == "text/event-stream"


async def test_error_bodies_and_headers() -> None:
    with MessagesAPI() as api:
        c = client(api)
        api.inject(429, retry_after=7)
        with pytest.raises(anthropic.RateLimitError) as info:
            await c.messages.create(
                model="claude-sonnet-4-6", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
        assert info.value.response.headers["retry-after"] == "7"
        assert info.value.body == {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "injected 429"},
        }
        api.inject(529)
        with pytest.raises(anthropic.APIStatusError) as info2:
            await c.messages.create(
                model="claude-sonnet-4-6", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
        assert info2.value.status_code == 529
        # the real API's request validation: a tool_use without its tool_result is a 400
        bad = [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "Skill", "input": {}}],
            },
            {"role": "user", "content": "no result"},
        ]
        with pytest.raises(anthropic.BadRequestError, match="tool_use` ids were found without `tool_result`"):
            await c.messages.create(model="claude-sonnet-4-6", max_tokens=5, messages=bad)  # type: ignore[arg-type]
        with pytest.raises(anthropic.NotFoundError):
            await c.messages.create(model="gpt-4", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        await c.close()
        unauth = httpx.post(f"{api.base_url}/v1/messages", json={})
    assert unauth.status_code == 401
    assert unauth.json()["error"]["type"] == "authentication_error"


async def test_cache_reads_are_computed_from_prefixes_seen() -> None:
    system = [{"type": "text", "text": "s" * 200, "cache_control": {"type": "ephemeral"}}]
    with MessagesAPI() as api:
        c = client(api)
        kw = {"model": "claude-sonnet-4-6", "max_tokens": 5, "tools": TOOLS, "system": system}
        a = await c.messages.create(**kw, messages=[{"role": "user", "content": "one"}])  # type: ignore[arg-type]
        b = await c.messages.create(**kw, messages=[{"role": "user", "content": "two"}])  # type: ignore[arg-type]
        other = await c.messages.create(  # another model has its own cache
            **{**kw, "model": "claude-haiku-4-5"},
            messages=[{"role": "user", "content": "two"}],  # type: ignore[arg-type]
        )
        short = await c.messages.create(  # below the minimum cacheable length: nothing cached
            model="claude-sonnet-4-6",
            max_tokens=5,
            system=system,
            messages=[{"role": "user", "content": "x"}],
        )
        await c.close()
    prefix = count_tokens(json.dumps(TOOLS[0], sort_keys=True, separators=(",", ":")))
    assert a.usage.cache_creation_input_tokens >= prefix
    assert a.usage.cache_read_input_tokens == 0
    assert b.usage.cache_read_input_tokens == a.usage.cache_creation_input_tokens
    assert b.usage.cache_creation_input_tokens == 0
    assert other.usage.cache_read_input_tokens == 0
    assert short.usage.cache_creation_input_tokens == 0
    assert short.usage.cache_read_input_tokens == 0


async def test_batches_models_and_count_tokens() -> None:
    with MessagesAPI(ScriptResponder(default=[{"text": "hello"}]), batch_polls=1) as api:
        c = client(api)
        api.batch_errors["b"] = ("invalid_request_error", "bad params")
        params = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "x"}],
        }
        batch = await c.messages.batches.create(
            requests=[{"custom_id": "a", "params": params}, {"custom_id": "b", "params": params}]  # type: ignore[list-item]
        )
        assert batch.processing_status == "in_progress"
        assert (await c.messages.batches.retrieve(batch.id)).processing_status == "in_progress"
        done = await c.messages.batches.retrieve(batch.id)
        assert done.processing_status == "ended"
        assert done.request_counts.succeeded == 1
        assert done.request_counts.errored == 1
        results = {r.custom_id: r.result async for r in await c.messages.batches.results(batch.id)}
        model = await c.models.retrieve("claude-haiku-4-5")
        tokens = await c.messages.count_tokens(
            model="claude-sonnet-4-6", messages=[{"role": "user", "content": "x"}]
        )
        await c.close()
    assert results["a"].type == "succeeded"
    assert results["b"].type == "errored"
    assert model.id == "claude-haiku-4-5-20251001"
    assert tokens.input_tokens > 0
