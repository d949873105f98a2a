"""A local stand-in for the OpenAI Responses API with SSE (what Codex CLI speaks): real HTTP on 127.0.0.1.

Written from the public API reference and the captures in ``../shared/design/agent-clis/``:
``POST {base}/responses`` takes ``model``, ``input`` (items: ``message`` with ``role``
``developer``/``user``/``assistant`` and ``input_text``/``output_text`` parts, ``function_call``
{``call_id``, ``name``, ``arguments``}, ``function_call_output`` {``call_id``, ``output``}), ``tools``,
``stream``. With ``stream: true`` the answer is ``text/event-stream``: ``response.created``, then per
output item ``response.output_item.added`` / ``response.output_item.done`` (a ``message`` item with
``output_text`` content, or a ``function_call`` item), then ``response.completed`` carrying the
response with its ``usage`` {``input_tokens``, ``input_tokens_details.cached_tokens``,
``output_tokens``, ``output_tokens_details.reasoning_tokens``, ``total_tokens``}. Any other path
answers 404 (Codex's ``/analytics/...`` posts are harmless).

Scripted per query like the Messages API stand-in::

    with ResponsesAPI(ResponsesScript({"undo the release": ["deploy", "rollback"]})) as api:
        ...  # codex config: base_url = api.base_url
        api.requests  # every /responses body, in order

A step that is a skill name answers with Codex's shell tool (``exec_command``) running
``cat <path of that skill's SKILL.md>``, the path read off the skills listing the request carries (its
``r0`` alias expanded) as a model would, else ``.agents/skills/<name>/SKILL.md``; ``{"text": ...}``
answers with a message; ``{"tool": name, "arguments": {...}}`` calls another tool. The n-th reply of a
conversation is the n-th step (n = the tool results sent back so far); past the script, a final message.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from skillreach.models import Usage
from tests.fakes._server import JSONHandler, LocalServer

__all__ = [
    "ResponsesAPI",
    "ResponsesReply",
    "ResponsesScript",
    "function_call",
    "listing_of",
    "message",
    "query_of",
    "skill_read",
    "turn_of",
]

_ids = itertools.count(1)


@dataclass
class ResponsesReply:
    """One model turn: its output items (``message`` / ``function_call``)."""

    items: list[dict[str, Any]] = field(default_factory=list)
    output_tokens: int = 10


Responder = Callable[[dict[str, Any]], ResponsesReply]


def message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{next(_ids):06d}",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    n = next(_ids)
    return {
        "type": "function_call",
        "id": f"fc_{n:06d}",
        "call_id": f"call_{n:06d}",
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def _texts(item: dict[str, Any]) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    return [str(p.get("text", "")) for p in content or [] if isinstance(p, dict)]


def query_of(body: dict[str, Any]) -> str:
    """The user's query: the user message texts that are not Codex's own context blocks."""
    parts: list[str] = []
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("role") == "user":
            parts += [t for t in _texts(item) if not t.lstrip().startswith("<")]
    return "\n".join(parts)


def listing_of(body: dict[str, Any]) -> str | None:
    """The ``<skills_instructions>`` block Codex sent (None when it listed no skills)."""
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("role") == "developer":
            for text in _texts(item):
                if text.startswith("<skills_instructions>"):
                    return text
    return None


def turn_of(body: dict[str, Any]) -> int:
    return sum(
        1 for i in body.get("input") or [] if isinstance(i, dict) and i.get("type") == "function_call_output"
    )


def skill_path(body: dict[str, Any], skill: str) -> str:
    """Where the listing says ``skill``'s SKILL.md is (aliases expanded), else the workspace default."""
    listing = listing_of(body) or ""
    roots = dict(re.findall(r"^- `(r\d+)` = `(.*)`$", listing, flags=re.M))
    found = re.search(rf"^- {re.escape(skill)}:.*\(file: (.+)\)$", listing, flags=re.M)
    if found is None:
        return f".agents/skills/{skill}/SKILL.md"
    path = found.group(1)
    alias, _, rest = path.partition("/")
    return f"{roots[alias]}/{rest}" if alias in roots else path


def skill_read(body: dict[str, Any], skill: str) -> dict[str, Any]:
    """Codex's shell tool reading ``skill``'s SKILL.md (what the model does to load a skill)."""
    return function_call("exec_command", {"cmd": f"cat {shlex.quote(skill_path(body, skill))}"})


class ResponsesScript:
    """Scripted conversations per query: ``{query or part of it: [step, ...]}`` (see the module doc)."""

    def __init__(
        self,
        script: dict[str, list[Any]] | None = None,
        *,
        default: list[Any] | None = None,
        final_text: str = "Done.",
    ) -> None:
        self.script = dict(script or {})
        self.default = list(default or [])
        self.final_text = final_text

    def steps_for(self, body: dict[str, Any]) -> list[Any]:
        text = query_of(body)
        if text in self.script:
            return self.script[text]
        for key in sorted(self.script, key=len, reverse=True):
            if key in text:
                return self.script[key]
        return self.default

    def __call__(self, body: dict[str, Any]) -> ResponsesReply:
        steps = self.steps_for(body)
        turn = turn_of(body)
        step = steps[turn] if turn < len(steps) else None
        if isinstance(step, str):
            return ResponsesReply([skill_read(body, step)])
        if isinstance(step, dict) and "tool" in step:
            return ResponsesReply([function_call(str(step["tool"]), dict(step.get("arguments", {})))])
        if isinstance(step, dict) and "text" in step:
            return ResponsesReply([message(str(step["text"]))])
        return ResponsesReply([message(self.final_text)])


def _tokens(obj: Any) -> int:
    return max(1, -(-len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False)) // 4))


class ResponsesAPI(LocalServer):
    """A Responses API server in a thread; ``base_url`` ends with ``/v1`` like the real one."""

    base_path = "/v1"

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        resolved_model: str | None = None,
        delay_s: float = 0.0,
        require_key: str | None = None,
    ) -> None:
        super().__init__()
        self.responder: Responder = responder or ResponsesScript()
        self.resolved_model = resolved_model
        self.delay_s = delay_s
        self.require_key = require_key
        self.headers: list[dict[str, str]] = []
        self.other_paths: list[str] = []
        self.stamps: list[float] = []
        """``time.monotonic()`` of each /responses request, in order."""
        self.served: list[tuple[dict[str, Any], Usage]] = []
        """(request body, usage) of every streamed response answered, in order, as a probe records it
        (cached input as cache reads)."""

    def served_usage(self, query: Callable[[dict[str, Any]], bool] | None = None) -> Usage:
        """What was served (to the requests ``query`` picks, or all), summed as a probe records usage."""
        total = Usage()
        for body, usage in list(self.served):
            if query is None or query(body):
                total = total + usage
        return total

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _make_handler(self)

    def _events(self, body: dict[str, Any], reply: ResponsesReply) -> bytes:
        rid = f"resp_{next(_ids):08d}"
        model = self.resolved_model or str(body.get("model"))
        created = int(time.time())
        base = {"id": rid, "object": "response", "created_at": created, "model": model}
        out: list[bytes] = []
        seq = itertools.count()

        def emit(kind: str, data: dict[str, Any]) -> None:
            payload = {"type": kind, "sequence_number": next(seq), **data}
            out.append(f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode())

        emit("response.created", {"response": {**base, "status": "in_progress", "output": []}})
        for index, item in enumerate(reply.items):
            emit(
                "response.output_item.added",
                {"output_index": index, "item": {**item, "status": "in_progress"}},
            )
            emit("response.output_item.done", {"output_index": index, "item": item})
        input_tokens = _tokens(body.get("input")) + _tokens(body.get("tools") or [])
        usage = {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + reply.output_tokens,
        }
        response = {**base, "status": "completed", "output": reply.items, "usage": usage}
        with self._lock:
            self.served.append((body, Usage(input_tokens=input_tokens, output_tokens=reply.output_tokens)))
        emit("response.completed", {"response": response})
        return b"".join(out)


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _make_handler(api: ResponsesAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(JSONHandler):
        def do_GET(self) -> None:
            with api._lock:
                api.other_paths.append(self.path)
            self.send_json(404, _error(f"unknown path {self.path}", "invalid_request_error"))

        def do_POST(self) -> None:
            raw = self.read_raw()
            if not self.path.rstrip("/").endswith("/responses"):
                with api._lock:
                    api.other_paths.append(self.path)
                self.send_json(404, _error(f"unknown path {self.path}", "invalid_request_error"))
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self.send_json(400, _error("body is not JSON", "invalid_request_error"))
                return
            with api._lock:
                api.requests.append(body)
                api.stamps.append(time.monotonic())
                api.headers.append({k.lower(): v for k, v in self.headers.items()})
            if (
                api.require_key is not None
                and self.headers.get("authorization") != f"Bearer {api.require_key}"
            ):
                self.send_json(
                    401, _error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
                )
                return
            fault = api._next_fault()
            if fault is not None:
                status, retry_after = fault
                headers = {"retry-after": retry_after} if retry_after is not None else {}
                self.send_json(status, _error(f"injected {status}", "server_error"), headers)
                return
            if not body.get("model") or not isinstance(body.get("input"), list):
                self.send_json(400, _error("model and input are required", "invalid_request_error"))
                return
            if api.delay_s:
                time.sleep(api.delay_s)
            reply = api.responder(body)
            if not body.get("stream"):
                items = reply.items
                self.send_json(200, {"id": f"resp_{next(_ids):08d}", "object": "response", "output": items})
                return
            self.send_bytes(200, api._events(body, reply), "text/event-stream", {"cache-control": "no-cache"})

    return Handler
