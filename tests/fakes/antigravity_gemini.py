"""A local stand-in for the Gemini API endpoint the Antigravity SDK's ``localharness`` calls.

Seen from google-antigravity 0.1.22 pointed at ``GeminiAPIEndpoint(base_url=...)``: the harness sends
``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` with header ``x-goog-api-key`` and a body
``{"contents": [{"role": "user"|"model", "parts": [...]}], "systemInstruction": {"parts": [...]},
"tools": [{"functionDeclarations": [{"name": "view_file", "parametersJsonSchema": ...}, ...]}],
"toolConfig", "generationConfig", "sessionId"}``. The system instruction lists the skills as
``- <name> (<path to SKILL.md>): <description>``. Replies follow the public API reference: server-sent
events ``data: {GenerateContentResponse}`` with ``candidates[0].content.parts`` (``text`` or
``functionCall`` {name, args}), ``finishReason``, ``usageMetadata`` {promptTokenCount,
candidatesTokenCount, totalTokenCount}, ``modelVersion`` and ``responseId``; errors are
``{"error": {"code", "message", "status"}}``. ``:generateContent`` (no streaming) is served too.

Usage::

    with GeminiAPI(plan={"fill the form": ["docx", "pdf"]}) as api:
        endpoint = GeminiAPIEndpoint(base_url=api.base_url, api_key="test")
        ...
        api.requests  # every received body

The default responder reads the skill list from the system instruction and, for a conversation whose
first user text contains a ``plan`` key, answers the n-th model turn with a ``view_file`` call on the
n-th planned skill's ``SKILL.md`` (``{"read": "<path>"}`` reads any path, ``{"text": ...}`` answers
with text); after the plan it answers ``Done.``. ``fail(status, times=, retry_after=)`` injects faults.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from skillreach.models import Usage
from tests.fakes._server import JSONHandler, LocalServer

__all__ = ["GeminiAPI", "first_user_text", "model_turns", "skill_locations"]

Responder = Callable[[dict[str, Any]], dict[str, Any]]
_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def _texts(content: dict[str, Any]) -> str:
    return "".join(str(p.get("text", "")) for p in content.get("parts") or [] if isinstance(p, dict))


def first_user_text(body: dict[str, Any]) -> str:
    for c in body.get("contents") or []:
        if c.get("role") == "user":
            return _texts(c)
    return ""


def gemini_usage(u: dict[str, Any]) -> Usage:
    """A response's ``usageMetadata`` as a probe records it."""
    cached = int(u.get("cachedContentTokenCount") or 0)
    return Usage(
        input_tokens=int(u.get("promptTokenCount") or 0) - cached,
        output_tokens=int(u.get("candidatesTokenCount") or 0) + int(u.get("thoughtsTokenCount") or 0),
        cache_read_input_tokens=cached,
    )


def model_turns(body: dict[str, Any]) -> int:
    """Model replies so far (the harness sends function responses back under the model role too)."""
    return sum(
        1
        for c in body.get("contents") or []
        if c.get("role") == "model"
        and any("functionCall" in p or "text" in p for p in c.get("parts") or [] if isinstance(p, dict))
    )


def skill_locations(body: dict[str, Any]) -> dict[str, str]:
    """name → SKILL.md path, from the system instruction's skill list."""
    system = _texts(body.get("systemInstruction") or {})
    return {m.group(1): m.group(2) for m in re.finditer(r"^- (\S+) \((/[^)]*SKILL\.md)\):", system, re.M)}


class GeminiAPI(LocalServer):
    """The server, in a thread. ``base_url`` has no version path (the harness adds ``/v1beta``)."""

    def __init__(
        self,
        *,
        plan: dict[str, list[Any]] | None = None,
        responder: Responder | None = None,
        model_version: str = "gemini-2.5-flash-stand-in-001",
    ) -> None:
        super().__init__()
        self.plan = plan or {}
        self.responder = responder or self._route
        self.model_version = model_version
        self.paths: list[str] = []
        self.keys: list[str | None] = []
        self.served: list[tuple[dict[str, Any], Usage]] = []
        """(request body, usage) of every response answered, in order, as a probe records it (cached
        content as cache reads, thoughts as output)."""

    def served_usage(self, query: Callable[[dict[str, Any]], bool] | None = None) -> Usage:
        """What was served (to the requests ``query`` picks, or all), summed as a probe records usage."""
        total = Usage()
        for body, usage in list(self.served):
            if query is None or query(body):
                total = total + usage
        return total

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler(self)

    # ------------------------------------------------------------------------------ responses
    def response(
        self,
        *,
        text: str | None = None,
        calls: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
        prompt_tokens: int = 1000,
        output_tokens: int = 20,
    ) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if text:
            parts.append({"text": text})
        parts += [{"functionCall": {"name": n, "args": a}} for n, a in calls]
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": prompt_tokens,
                "candidatesTokenCount": output_tokens,
                "totalTokenCount": prompt_tokens + output_tokens,
            },
            "modelVersion": self.model_version,
            "responseId": uuid.uuid4().hex[:20],
        }

    def _route(self, body: dict[str, Any]) -> dict[str, Any]:
        query = first_user_text(body)
        steps: list[Any] = []
        for key in sorted(self.plan, key=len, reverse=True):
            if key in query:
                steps = self.plan[key]
                break
        turn = model_turns(body)
        if turn >= len(steps):
            return self.response(text="Done.")
        step = steps[turn]
        if isinstance(step, dict) and "text" in step:
            return self.response(text=str(step["text"]))
        if isinstance(step, dict) and "read" in step:
            return self.response(calls=[("view_file", {"AbsolutePath": step["read"]})])
        path = skill_locations(body).get(str(step), f"/missing/{step}/SKILL.md")
        return self.response(calls=[("view_file", {"AbsolutePath": path})])


def _handler(api: GeminiAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(JSONHandler):
        def _json(self, status: int, obj: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            self.send_json(status, obj, headers, "application/json; charset=UTF-8")

        def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
            self._json(
                status,
                {"error": {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}},
                headers,
            )

        def do_POST(self) -> None:
            raw = self.read_raw()
            path = self.path.split("?", 1)[0]
            m = re.fullmatch(
                r"/v1(?:beta|alpha)?/models/([^/:]+):(streamGenerateContent|generateContent)", path
            )
            if m is None:
                self._error(404, f"unknown path {self.path}")
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._error(400, "Invalid JSON payload received.")
                return
            with api._lock:
                api.requests.append(body)
                api.paths.append(self.path)
                api.keys.append(self.headers.get("x-goog-api-key"))
            fault = api._next_fault()
            if fault is not None:
                status, retry_after = fault
                self._error(
                    status, f"injected {status}", {"retry-after": retry_after} if retry_after else None
                )
                return
            if not body.get("contents"):
                self._error(400, "* GenerateContentRequest.contents: contents is not specified")
                return
            reply = api.responder(body)
            with api._lock:
                api.served.append((body, gemini_usage(reply.get("usageMetadata") or {})))
            if m.group(2) == "generateContent":
                self._json(200, reply)
                return
            self.send_bytes(200, b"data: " + json.dumps(reply).encode() + b"\r\n\r\n", "text/event-stream")

    return Handler
