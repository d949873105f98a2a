"""A local stand-in for an OpenAI-compatible Chat Completions endpoint: real HTTP on 127.0.0.1.

Written from the public API reference: ``POST {base}/chat/completions`` takes ``model``, ``messages``
(roles ``system``/``developer``/``user``/``assistant``/``tool``; an assistant message may carry
``tool_calls`` and each ``tool`` message answers one of them by ``tool_call_id``), ``tools`` (function
tools with a JSON-schema ``parameters``) and answers a ``chat.completion`` object: ``id``, ``object``,
``created``, ``model`` (the resolved snapshot), ``choices[0].message`` with ``content`` and/or
``tool_calls`` (``{"id", "type": "function", "function": {"name", "arguments": "<JSON string>"}}``),
``finish_reason`` (``tool_calls`` | ``stop``), and ``usage`` {``prompt_tokens``, ``completion_tokens``,
``total_tokens``, ``prompt_tokens_details.cached_tokens``}. Errors are ``{"error": {"message", "type",
"param", "code"}}`` with the HTTP status, and 429/503 may carry ``retry-after``.

Usage::

    with OpenAIChat(plan={"rotate the keys": ["secrets", "rollback"]}) as api:
        client = openai.AsyncOpenAI(base_url=api.base_url, api_key="test")
        ...
        api.requests  # every received JSON body, in order

The default responder is a deterministic "router": for a conversation whose first user message is a
key of ``plan`` (or contains it), the n-th reply calls ``Skill`` with the n-th planned skill, then
answers with text (``skill_tool`` / ``skill_arg`` name the tool and its argument: OpenCode's
``skill {"name"}``, Copilot CLI's ``skill {"skill"}``). ``responder`` replaces it (a callable body →
completion dict); ``fail(status, times=, retry_after=)`` injects faults; ``delay_s`` makes replies slow
(timeouts). ``models_api=False`` drops ``GET /models`` (404, as some gateways do; ``models_status=405``: 405).

With ``stream: true`` (OpenCode, Copilot CLI) the same completion is sent as server-sent events, as the
API reference describes: ``chat.completion.chunk`` objects (the role first, then the text as
``delta.content``, each tool call as ``delta.tool_calls[]`` with its ``index``, ``id``, ``function.name``
and ``function.arguments``, then an empty delta with the ``finish_reason``), a last chunk with empty
``choices`` and the ``usage`` when ``stream_options.include_usage`` asks for it, then ``data: [DONE]``.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from skillreach.models import Usage
from tests.fakes._server import JSONHandler, LocalServer

__all__ = ["OpenAIChat", "completion", "first_user_text", "sse_chunks", "tool_call"]

Responder = Callable[[dict[str, Any]], dict[str, Any]]

_ids = itertools.count(1)


def tool_call(name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": f"call_{next(_ids):06d}", "type": "function", "function": {"name": name, "arguments": args}}


def completion(
    *,
    model: str,
    text: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    prompt_tokens: int = 100,
    completion_tokens: int = 10,
    cached_tokens: int = 0,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": f"chatcmpl-{next(_ids):08d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_local",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }


def chat_usage(u: dict[str, Any]) -> Usage:
    """A completion's ``usage`` as a probe records it (cached prompt tokens as cache reads)."""
    cached = int((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return Usage(
        input_tokens=int(u.get("prompt_tokens") or 0) - cached,
        output_tokens=int(u.get("completion_tokens") or 0),
        cache_read_input_tokens=cached,
    )


def first_user_text(body: dict[str, Any]) -> str:
    for m in body.get("messages", []):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def sse_chunks(reply: dict[str, Any], *, include_usage: bool) -> bytes:
    """A ``chat.completion`` as the streamed ``chat.completion.chunk`` events that carry it."""
    base = {
        "id": reply.get("id"),
        "object": "chat.completion.chunk",
        "created": reply.get("created"),
        "model": reply.get("model"),
        "system_fingerprint": reply.get("system_fingerprint"),
    }
    choice = reply["choices"][0]
    message = choice.get("message") or {}
    out: list[dict[str, Any]] = []

    def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
        out.append(
            {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        )

    chunk({"role": "assistant", "content": ""})
    if message.get("content"):
        chunk({"content": message["content"]})
    for index, call in enumerate(message.get("tool_calls") or []):
        chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {
                            "name": call["function"]["name"],
                            "arguments": call["function"]["arguments"],
                        },
                    }
                ]
            }
        )
    chunk({}, choice.get("finish_reason") or "stop")
    if include_usage:
        out.append({**base, "choices": [], "usage": reply.get("usage")})
    lines = [f"data: {json.dumps(c)}\n\n" for c in out] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


class OpenAIChat(LocalServer):
    """A Chat Completions server in a thread. ``base_url`` ends with ``/v1`` like the real one."""

    base_path = "/v1"

    def __init__(
        self,
        *,
        plan: dict[str, list[str]] | None = None,
        responder: Responder | None = None,
        resolved_model: str = "local-model-2026-01-01",
        delay_s: float = 0.0,
        require_key: str | None = None,
        models_api: bool = True,
        models_status: int = 404,
        skill_tool: str = "Skill",
        skill_arg: str = "skill",
    ) -> None:
        super().__init__()
        self.models_api = models_api
        self.models_status = models_status
        self.plan = plan or {}
        self.skill_tool = skill_tool
        self.skill_arg = skill_arg
        self.responder = responder or self._route
        self.resolved_model = resolved_model
        self.delay_s = delay_s
        self.require_key = require_key
        self.headers: list[dict[str, str]] = []
        self.served: list[tuple[dict[str, Any], Usage]] = []
        """(request body, usage) of every completion answered, in order: what a client was served, as a
        probe records it (cached prompt tokens as cache reads)."""

    def served_usage(self, query: Callable[[dict[str, Any]], bool] | None = None) -> Usage:
        """What was served (to the requests ``query`` picks, or all), summed as a probe records usage."""
        total = Usage()
        for body, usage in list(self.served):
            if query is None or query(body):
                total = total + usage
        return total

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _make_handler(self)

    # --------------------------------------------------------------------------------- behaviour
    def _route(self, body: dict[str, Any]) -> dict[str, Any]:
        """Call ``Skill`` with the planned skills one per reply, then answer with text."""
        query = first_user_text(body)
        planned: list[str] = []
        for key, skills in self.plan.items():
            if key == query or key in query:
                planned = skills
                break
        done = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        if done < len(planned):
            return completion(
                model=self.resolved_model,
                tool_calls=[tool_call(self.skill_tool, {self.skill_arg: planned[done]})],
            )
        return completion(model=self.resolved_model, text="Done.")


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _make_handler(api: OpenAIChat) -> type[BaseHTTPRequestHandler]:
    class Handler(JSONHandler):
        _send = JSONHandler.send_json

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models") and not api.models_api:
                self._send(api.models_status, _error("File Not Found", "not_found_error"))
            elif self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": api.resolved_model, "object": "model"}]})
            else:
                self._send(404, _error(f"unknown path {self.path}", "invalid_request_error"))

        def do_POST(self) -> None:
            raw = self.read_raw()
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, _error(f"unknown path {self.path}", "invalid_request_error"))
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(400, _error("body is not JSON", "invalid_request_error"))
                return
            with api._lock:
                api.requests.append(body)
                api.headers.append({k.lower(): v for k, v in self.headers.items()})
            if api.require_key is not None:
                auth = self.headers.get("authorization", "")
                if auth != f"Bearer {api.require_key}":
                    self._send(
                        401, _error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
                    )
                    return
            fault = api._next_fault()
            if fault is not None:
                status, retry_after = fault
                headers = {"retry-after": retry_after} if retry_after is not None else {}
                kind = "rate_limit_error" if status == 429 else "server_error"
                self._send(status, _error(f"injected {status}", kind), headers)
                return
            problem = _validate(body)
            if problem:
                self._send(400, _error(problem, "invalid_request_error"))
                return
            if api.delay_s:
                time.sleep(api.delay_s)
            reply = api.responder(body)
            with api._lock:
                api.served.append((body, chat_usage(reply.get("usage") or {})))
            if body.get("stream"):
                include = bool((body.get("stream_options") or {}).get("include_usage"))
                self.send_bytes(200, sse_chunks(reply, include_usage=include), "text/event-stream")
                return
            self._send(200, reply)

    return Handler


def _validate(body: dict[str, Any]) -> str | None:
    """The request checks the real endpoint makes that a client could get wrong."""
    if not body.get("model"):
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty array"
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in {"system", "developer", "user", "assistant", "tool"}:
            return f"messages[{i}].role {role!r} is invalid"
        if role == "assistant":
            for c in m.get("tool_calls") or []:
                open_calls.add(c["id"])
                try:
                    json.loads(c["function"]["arguments"])
                except (KeyError, ValueError):
                    return f"messages[{i}].tool_calls arguments are not JSON"
        elif role == "tool":
            cid = m.get("tool_call_id")
            if cid not in open_calls:
                return f"messages[{i}] answers unknown tool_call_id {cid!r}"
            open_calls.discard(cid)
        elif open_calls:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages responding "
                "to each 'tool_call_id'."
            )
    for t in body.get("tools") or []:
        if t.get("type") != "function" or "name" not in t.get("function", {}):
            return "tools[].type must be 'function' with a function name"
    return None
