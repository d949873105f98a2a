"""The probe's relay to the model (``runtimes/_relay.py``), against the project's stand-ins, an HTTP client
standing in for the agent CLI: responses passed through unchanged while their usage and tool calls (in
the model's order) are read for the three APIs the CLIs speak; a request after the probe stopped is held,
never forwarded; and :class:`ModelOrder` credits a CLI's loads in the model's order whatever order they
finished in."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from skillreach.models import Usage
from skillreach.runtimes._relay import ModelOrder, ModelRelay, Sequencer
from tests.fakes.antigravity_gemini import GeminiAPI
from tests.fakes.openai_chat import OpenAIChat, completion, tool_call
from tests.fakes.responses_api import ResponsesAPI, ResponsesReply, function_call, message


def chat_body(stream: bool = True, turn: int = 0) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "rotate the keys"}]
    if turn:
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [tool_call("skill", {"name": "pdf"}) | {"id": "c1"}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]
    return {"model": "m", "messages": messages, "stream": stream, "stream_options": {"include_usage": True}}


def two_calls(body: dict[str, Any]) -> dict[str, Any]:
    if any(m.get("role") == "tool" for m in body["messages"]):
        return completion(model="m", text="Done.", prompt_tokens=300, completion_tokens=7, cached_tokens=120)
    calls = [tool_call("skill", {"name": "secrets"}), tool_call("skill", {"name": "pdf"})]
    return completion(model="m", tool_calls=calls, prompt_tokens=200, completion_tokens=13)


async def test_chat_completions_pass_through_while_usage_and_calls_are_read() -> None:
    with OpenAIChat(responder=two_calls) as api:
        async with httpx.AsyncClient() as direct:
            want = await direct.post(f"{api.base_url}/chat/completions", json=chat_body())
        async with ModelRelay(api.base_url, "chat") as relay, httpx.AsyncClient() as client:
            assert relay.base_url.endswith("/v1")
            assert relay.base_url.startswith("http://127.0.0.1:")
            got = await client.post(f"{relay.base_url}/chat/completions", json=chat_body())
            plain = await client.post(f"{relay.base_url}/chat/completions", json=chat_body(False, turn=1))
            await relay.settle(5)
            exchanges = relay.snapshot()
            usage, turns = relay.usage(), relay.turns()
    assert got.status_code == 200
    assert got.headers["content-type"].startswith("text/event-stream")

    def strip_ids(text: str) -> str:  # each reply has fresh ids and a timestamp: compare the rest
        import re

        return re.sub(r'"(id|created)": ("[^"]*"|\d+)', "", text)

    assert strip_ids(got.text) == strip_ids(want.text)
    assert plain.json()["choices"][0]["message"]["content"] == "Done."
    assert [e.calls for e in exchanges] == [[("skill", {"name": "secrets"}), ("skill", {"name": "pdf"})], []]
    assert [e.usage for e in exchanges] == [
        Usage(input_tokens=200, output_tokens=13),
        Usage(input_tokens=180, output_tokens=7, cache_read_input_tokens=120),
    ]
    assert usage == sum((u for _, u in api.served[1:]), Usage())  # the first was asked directly
    assert turns == 2 == len(api.requests) - 1


async def test_responses_and_gemini_streams_are_read_too() -> None:
    def responder(body: dict[str, Any]) -> ResponsesReply:
        return ResponsesReply([function_call("exec_command", {"cmd": "cat a/SKILL.md"}), message("hi")], 9)

    body = {"model": "m", "input": [{"role": "user", "content": "q"}], "stream": True}
    with ResponsesAPI(responder) as api:
        async with ModelRelay(api.base_url, "responses") as relay, httpx.AsyncClient() as client:
            got = await client.post(f"{relay.base_url}/responses", json=body)
            await relay.settle(5)
            responses = relay.snapshot()
        assert "response.completed" in got.text
        assert relay.usage() == api.served_usage()
    assert responses[0].calls == [("exec_command", {"cmd": "cat a/SKILL.md"})]
    assert responses[0].usage is not None
    assert responses[0].usage.output_tokens == 9

    gemini = GeminiAPI()
    gemini.responder = lambda body: gemini.response(calls=[("activate_skill", {"name": "b"}),
                                                           ("activate_skill", {"name": "a"})])  # fmt: skip
    request = {"contents": [{"role": "user", "parts": [{"text": "q"}]}]}
    with gemini:
        async with ModelRelay(gemini.base_url, "gemini") as relay, httpx.AsyncClient() as client:
            path = "/v1beta/models/m:streamGenerateContent?alt=sse"
            got = await client.post(relay.base_url + path, json=request, headers={"x-goog-api-key": "k"})
            await relay.settle(5)
            served = relay.snapshot()
        assert got.status_code == 200
        assert gemini.keys == ["k"]  # headers pass through
        assert relay.usage() == gemini.served_usage() == Usage(input_tokens=1000, output_tokens=20)
    assert served[0].calls == [("activate_skill", {"name": "b"}), ("activate_skill", {"name": "a"})]


async def test_a_turn_after_the_probe_stopped_is_held_never_forwarded() -> None:
    asked: list[int] = []

    async def admit(index: int) -> bool:
        asked.append(index)
        return False

    with OpenAIChat(responder=two_calls) as api:
        async with ModelRelay(api.base_url, "chat", admit=admit) as relay, httpx.AsyncClient() as client:
            first = await client.post(f"{relay.base_url}/chat/completions", json=chat_body())
            with pytest.raises(httpx.TimeoutException):
                await client.post(f"{relay.base_url}/chat/completions", json=chat_body(turn=1), timeout=1.0)
            exchanges = relay.snapshot()
        assert first.status_code == 200
        assert len(api.requests) == 1  # the second turn never reached the server
    assert asked == [1]
    assert [e.held for e in exchanges] == [False, True]
    assert relay.turns() == 1


async def test_an_endpoint_that_cannot_be_reached_is_a_502_and_an_unknown_usage_none() -> None:
    async with (
        ModelRelay("http://127.0.0.1:9/v1", "chat", timeout_s=5) as relay,
        httpx.AsyncClient() as client,
    ):
        got = await client.post(f"{relay.base_url}/chat/completions", json=chat_body())
    assert got.status_code == 502
    assert relay.turns() == 0
    assert relay.usage() == Usage()
    with pytest.raises(ValueError, match="not an http"):
        ModelRelay("ftp://x", "chat")


def test_loads_are_credited_in_the_models_order() -> None:
    from skillreach.runtimes._relay import Exchange

    order = ModelOrder(lambda tool, args: args.get("name") if tool == "skill" else None)
    first = Exchange(0, 200, calls=[("skill", {"name": "a"}), ("read", {}), ("skill", {"name": "b"})])
    order.sync([first])
    assert order.loaded("b") == []  # a is not reported yet
    assert order.pending(before=1)
    assert order.loaded("a") == ["a", "b"]
    second = Exchange(1, 200, calls=[("skill", {"name": "c"}), ("skill", {"name": "d"})])
    order.sync([first, second])
    assert order.failed("c") == []
    assert order.loaded("d") == ["d"]
    # a load reported before its call was read takes its place after the calls read so far
    third = Exchange(2, 200, calls=[("skill", {"name": "e"})])
    order.sync([first, second, third])
    assert order.loaded("f") == []  # e comes first in the model's order
    assert order.settle(before=3) == ["f"]  # e was never reported: not loaded
    order.sync([first, second, third, Exchange(3, 200, calls=[("skill", {"name": "f"})])])
    assert order.planned[-1] == (2, "f")  # the call read late took the early report, not a new place
    assert not order.pending()


async def test_the_sequencer_waits_for_the_cli_before_the_next_turn_and_stops_there() -> None:
    credited: list[str] = []
    seq = Sequencer(lambda s: credited.append(s) is None and s != "b", lambda t, a: a.get("name"), settle_s=5)

    class Relay:
        def snapshot(self) -> list[Any]:
            from skillreach.runtimes._relay import Exchange

            return [Exchange(0, 200, calls=[("skill", {"name": "a"}), ("skill", {"name": "b"})])]

    seq.relay = Relay()  # type: ignore[assignment]
    seq.loaded("b")
    assert credited == []
    ask = asyncio.ensure_future(seq.admit(1))
    await asyncio.sleep(0.05)
    assert not ask.done()  # a is not reported yet: the next turn waits for it
    seq.loaded("a")
    assert await asyncio.wait_for(ask, 5) is False  # b was the target: the next turn never goes out
    assert credited == ["a", "b"]
    assert seq.stopped
