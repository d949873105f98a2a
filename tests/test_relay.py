"""The probe's relay to the model (``runtimes/_relay.py``), against the project's stand-ins, an HTTP client
standing in for the agent CLI: responses passed through unchanged while their usage and tool calls (in
the model's order) are read for the four APIs the CLIs speak; a request after the probe stopped is held,
never forwarded; and :class:`ModelOrder` credits a CLI's loads in the model's order whatever order they
finished in."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Any

import httpx
import pytest

from skillreach.models import Usage
from skillreach.runtimes._relay import ModelOrder, ModelRelay, Sequencer
from tests.fakes._server import JSONHandler, LocalServer
from tests.fakes.antigravity_gemini import GeminiAPI
from tests.fakes.messages_api import MessagesAPI, Reply, text_reply
from tests.fakes.messages_api import tool_call as messages_call
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


def messages_body(stream: bool, turn: int = 0) -> dict[str, Any]:
    """A Messages request whose long system prompt is a cache breakpoint (the stand-in caches it)."""
    system = [{"type": "text", "text": "You list skills. " * 600, "cache_control": {"type": "ephemeral"}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "rotate the keys"}]
    if turn:
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
        ]
    return {"model": "claude-sonnet-4-5", "max_tokens": 256, "system": system, "messages": messages,
            "stream": stream}  # fmt: skip


async def test_messages_api_streamed_and_not_usage_as_served_calls_in_order() -> None:
    def responder(body: dict[str, Any]) -> Any:
        if len(body["messages"]) > 1:
            return text_reply("Done.")
        return Reply([messages_call("read", {"path": "/s/secrets/SKILL.md"}),
                      messages_call("read", {"path": "/s/pdf/SKILL.md", "limit": 40})])  # fmt: skip

    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    with MessagesAPI(responder) as api:
        async with httpx.AsyncClient() as direct:
            want = await direct.post(f"{api.base_url}/v1/messages", json=messages_body(True), headers=headers)
        async with ModelRelay(api.base_url, "messages") as relay, httpx.AsyncClient() as client:
            got = await client.post(
                f"{relay.base_url}/v1/messages", json=messages_body(True), headers=headers
            )
            plain = await client.post(
                f"{relay.base_url}/v1/messages", json=messages_body(False, 1), headers=headers
            )
            count = await client.post(f"{relay.base_url}/v1/messages/count_tokens", json={}, headers=headers)
            await relay.settle(5)
            exchanges = relay.snapshot()
        served = [u for _, u in api.served[1:]]  # the first was asked directly
    assert got.headers["content-type"].startswith("text/event-stream")
    strip = lambda text: re.sub(r'"(id|cache_\w+|input_tokens)":("[^"]*"|\d+)', "", text)  # noqa: E731
    assert strip(got.text) == strip(want.text)  # passed through unchanged (fresh ids, a warm cache)
    assert plain.json()["content"][0]["text"] == "Done."
    assert count.status_code >= 400  # the stand-in has no count_tokens: its answer passed through
    assert len(exchanges) == 2
    assert relay.requests == 3  # relayed, never counted as a model turn
    assert [e.calls for e in exchanges] == [
        [("read", {"path": "/s/secrets/SKILL.md"}), ("read", {"path": "/s/pdf/SKILL.md", "limit": 40})],
        [],
    ]
    # the API's own counts: input without the cache's, the output of message_delta (not message_start's 1)
    assert [e.usage for e in exchanges] == served
    assert served[0].cache_read_input_tokens > 0
    assert served[1].output_tokens > 1
    assert relay.usage() == sum(served, Usage())
    assert relay.turns() == 2
    assert not relay.unknown()
    assert exchanges[0].model is not None
    assert exchanges[0].model.startswith("claude-sonnet-4-5")
    assert relay.model() == exchanges[0].model


class _CutOff(LocalServer):
    """A Messages API that starts a streamed reply (a tool call begins) and then closes the connection;
    ``overloaded``: a stream that is only the API's ``error`` event."""

    def __init__(self, overloaded: bool = False) -> None:
        super().__init__()
        self.overloaded = overloaded

    def handler(self) -> type[JSONHandler]:
        server = self

        class Handler(JSONHandler):
            def do_POST(self) -> None:
                self.read_raw()
                if server.overloaded:
                    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
                    data = f"event: error\ndata: {json.dumps(error)}\n\n".encode()
                    self.send_bytes(200, data, "text/event-stream")
                    return
                start = {"type": "message_start", "message": {"model": "claude-x", "usage": {
                    "input_tokens": 900, "output_tokens": 1}}}  # fmt: skip
                tool = {"type": "tool_use", "id": "t", "name": "read", "input": {}}
                block = {"type": "content_block_start", "index": 0, "content_block": tool}
                data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in (start, block))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(data.encode())
                self.close_connection = True

        return Handler


async def test_a_messages_stream_cut_off_leaves_its_usage_unknown_never_0() -> None:
    with _CutOff() as api:
        async with ModelRelay(api.base_url, "messages", timeout_s=10) as relay, httpx.AsyncClient() as client:
            with contextlib.suppress(httpx.HTTPError):
                await client.post(f"{relay.base_url}/v1/messages", json=messages_body(True))
            await relay.settle(5)
            exchange = relay.snapshot()[0]
    assert exchange.usage is None  # message_start's counts alone are not what was billed
    assert relay.unknown()
    assert exchange.calls == []  # the call never finished streaming


async def test_a_messages_stream_that_is_only_an_error_is_no_turn_and_nothing_served() -> None:
    with _CutOff(overloaded=True) as api:
        async with ModelRelay(api.base_url, "messages", timeout_s=10) as relay, httpx.AsyncClient() as client:
            got = await client.post(f"{relay.base_url}/v1/messages", json=messages_body(True))
            await relay.settle(5)
            exchange = relay.snapshot()[0]
    assert "overloaded_error" in got.text  # passed through for the CLI to retry
    assert exchange.status == 200
    assert not exchange.served  # the API's error, not a model turn
    assert relay.turns() == 0
    assert exchange.usage == Usage()  # the error came before any message: nothing was served
    assert not relay.unknown()
