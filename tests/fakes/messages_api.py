"""A Messages API stand-in: a real HTTP server on 127.0.0.1, in a thread, for tests and benchmarks.

Written from the public Messages API reference (request and response shapes, ``tool_use`` /
``tool_result``, server-sent events, usage with prompt-cache fields, error bodies, the Message Batches
endpoints and ``/v1/models/{id}``). No test double of the SDK: the official ``anthropic`` client (or
the real ``claude`` program) talks HTTP to it.

Usage::

    from tests.fakes.messages_api import MessagesAPI, ScriptResponder, skill_call, text_reply

    script = ScriptResponder({"fill in the pdf form": ["docx", "pdf"]})   # turn 1 Skill docx, turn 2 pdf
    with MessagesAPI(script, latency=0.0) as api:
        client = anthropic.AsyncAnthropic(base_url=api.base_url, api_key="test", max_retries=0)
        ...
        api.requests      # every Messages request body received (direct and inside batches), in order
        api.calls         # every HTTP call: Call(method, path, headers, body, status)
        api.inject(429, times=2, retry_after=0.05)   # the next 2 POST /v1/messages answer 429
        api.inject("drop")                           # the next one closes the connection unanswered
        api.inject(400, message="max_tokens: too large", error_type="invalid_request_error")

The responder
    ``responder(body: dict) -> Reply | dict | list | str | None`` is called once per Messages request
    (thread-safe code please: requests arrive concurrently). Return a :class:`Reply`, a list of content
    blocks, a full message dict, a plain string (an ``end_turn`` text reply) or ``None`` (a short
    ``end_turn`` text). Helpers: :func:`skill_call`, :func:`tool_call`, :func:`text_reply`,
    :func:`query_text` (the text of the first user message), :func:`turn_of` (how many assistant turns
    the request already holds: 0 on the first request of a conversation), :func:`tool_results` (the
    ``tool_result`` blocks of the last user message).

:class:`ScriptResponder` scripts conversations per query: ``{substring of the query: [step, ...]}``;
step *k* answers the request whose :func:`turn_of` is *k*. A step is a skill name (``Skill`` tool
call), a dict ``{"tool": NAME, "input": {...}}`` (any tool call), ``{"text": "..."}`` / ``None``
(``end_turn`` with that text), or a list of those (several blocks in one reply). Past the end of a
script, or for a query no key matches, the reply is ``end_turn`` text. A step calling a tool the
request does not offer becomes a text reply (the real model cannot call a tool it was not given).

Usage and prompt caching are computed honestly: input tokens are estimated as ``ceil(len(json)/4)``
per block, in the order tools → system → messages; every ``cache_control`` breakpoint marks a prefix;
a prefix the server has seen (same model, same bytes) within ``cache_ttl`` seconds is a cache read, the
rest up to the last breakpoint is a cache write, the remainder plain input. Prefixes shorter than
``min_cache_tokens`` are not cached (as the real API).

Models: ``aliases`` maps an alias to a dated snapshot (default: a few current aliases). A Messages
response's ``model`` is the resolved snapshot; ``GET /v1/models/{id}`` returns the model object;
an unknown model is a 404 ``not_found_error``. ``models_api=False`` drops the Models API as llama.cpp
and many gateways do: ``/v1/models/...`` answers 404 ``File Not Found`` (``models_status=405``: 405).

Batches: ``POST /v1/messages/batches`` runs every request through the responder at once and reports
``in_progress`` for the first ``batch_polls`` retrievals, then ``ended``; ``results_url`` serves JSONL
(``{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored", "error"}}``).
``api.batch_errors[custom_id] = (type, message)`` makes one request of a batch come back errored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from skillreach.models import Usage

__all__ = [
    "DEFAULT_ALIASES",
    "Call",
    "Fault",
    "MessagesAPI",
    "Reply",
    "ScriptResponder",
    "count_tokens",
    "query_text",
    "request_text",
    "served_usage",
    "skill_call",
    "text_reply",
    "tool_call",
    "tool_results",
    "turn_of",
]

DEFAULT_ALIASES: dict[str, str] = {
    "claude-sonnet-4-5": "claude-sonnet-4-5-20250929",
    "claude-haiku-4-5": "claude-haiku-4-5-20251001",
    "claude-opus-4-1": "claude-opus-4-1-20250805",
    "claude-sonnet-4-0": "claude-sonnet-4-20250514",
    "claude-sonnet-4-6": "claude-sonnet-4-6-20260115",
    "claude-opus-4-6": "claude-opus-4-6-20260115",
}
SYNTHETIC_SNAPSHOT = "20260101"
"""Any other ``claude-*`` alias resolves to ``<alias>-20260101``; a name not starting ``claude-`` is 404."""

HTTP_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    529: "overloaded_error",
}


# ------------------------------------------------------------------------------------------ replies


@dataclass
class Reply:
    """One assistant message. ``stop_reason`` defaults to ``tool_use`` when a block is a tool call."""

    content: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None
    output_tokens: int | None = None
    delay: float = 0.0
    """Extra seconds before answering (on top of the server's latency)."""


def _tool_id() -> str:
    return "toolu_" + uuid.uuid4().hex[:24]


def tool_call(name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": _tool_id(), "name": name, "input": input}


def skill_call(skill: str) -> dict[str, Any]:
    return tool_call("Skill", {"skill": skill})


def text_reply(text: str = "I can answer this directly.") -> Reply:
    return Reply([{"type": "text", "text": text}], "end_turn")


def _blocks_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if isinstance(block, dict):
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_result":
                parts.append(_blocks_text(block.get("content", "")))
    return "\n".join(parts)


def query_text(body: dict[str, Any]) -> str:
    """The text of the first user message (for the claude CLI, reminders and query together)."""
    for msg in body.get("messages", []):
        if msg.get("role") == "user":
            return _blocks_text(msg.get("content"))
    return ""


def request_text(body: dict[str, Any]) -> str:
    """Everything a request shows the model, as one string (for disclosure checks)."""
    return json.dumps(
        {"system": body.get("system"), "tools": body.get("tools"), "messages": body.get("messages")},
        ensure_ascii=False,
    )


def turn_of(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    msgs = body.get("messages", [])
    if not msgs or msgs[-1].get("role") != "user" or isinstance(msgs[-1].get("content"), str):
        return []
    return [b for b in msgs[-1]["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


def _offered_tools(body: dict[str, Any]) -> set[str]:
    return {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)}


class ScriptResponder:
    """Scripted conversations per query (see the module docstring)."""

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
        text = query_text(body)
        if text in self.script:  # exact match first: cheap for big scripts
            return self.script[text]
        # longest key first, so "fill the pdf form" beats "pdf"
        for key in sorted(self.script, key=len, reverse=True):
            if key in text:
                return self.script[key]
        return self.default

    def _block(self, step: Any, offered: set[str]) -> dict[str, Any] | None:
        if isinstance(step, str):
            return skill_call(step) if "Skill" in offered else None
        if isinstance(step, dict) and "tool" in step:
            name = str(step["tool"])
            return tool_call(name, dict(step.get("input", {}))) if name in offered else None
        if isinstance(step, dict) and "text" in step:
            return {"type": "text", "text": str(step["text"])}
        return None

    def __call__(self, body: dict[str, Any]) -> Reply:
        steps = self.steps_for(body)
        turn = turn_of(body)
        if turn >= len(steps) or steps[turn] is None:
            return text_reply(self.final_text)
        step = steps[turn]
        offered = _offered_tools(body)
        blocks = [self._block(s, offered) for s in (step if isinstance(step, list) else [step])]
        content = [b for b in blocks if b is not None]
        if not content:
            return text_reply(self.final_text)
        return Reply(content)


# ------------------------------------------------------------------------------------------- tokens


def served_usage(api: MessagesAPI, query: Callable[[dict[str, Any]], bool] | None = None) -> Usage:
    """What ``api`` served (to the requests ``query`` picks, or all), summed as a probe records usage."""
    total = Usage()
    for body, usage in list(api.served):
        if query is None or query(body):
            total = total + usage
    return total


def _as_usage(u: dict[str, Any]) -> Usage:
    return Usage(**{k: int(u.get(k) or 0) for k in Usage.model_fields})


def count_tokens(obj: Any) -> int:
    """The stand-in's token estimate: ceil(len(compact JSON) / 4), at least 1."""
    text = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return max(1, math.ceil(len(text) / 4))


def _strip_cache_control(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_cache_control(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [_strip_cache_control(v) for v in obj]
    return obj


def _segments(body: dict[str, Any]) -> list[tuple[int, bool, str]]:
    """(tokens, is_breakpoint, canonical JSON) per cacheable block, in prefix order."""
    out: list[tuple[int, bool, str]] = []

    def add(block: Any) -> None:
        bp = isinstance(block, dict) and "cache_control" in block
        canon = json.dumps(_strip_cache_control(block), separators=(",", ":"), sort_keys=True)
        out.append((count_tokens(canon), bp, canon))

    for tool in body.get("tools") or []:
        add(tool)
    system = body.get("system")
    if isinstance(system, str):
        add({"type": "text", "text": system})
    elif isinstance(system, list):
        for block in system:
            add(block)
    for msg in body.get("messages", []):
        content = msg.get("content")
        if isinstance(content, str):
            add({"role": msg.get("role"), "text": content})
        else:
            for block in content or []:
                add({"role": msg.get("role"), **block} if isinstance(block, dict) else block)
    return out


# ------------------------------------------------------------------------------------------- server


@dataclass
class Call:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    at: float = field(default_factory=time.time)  # when the request arrived (rate-limit tests)
    answered: float = 0.0  # when its answer was written (0 while there is none)


@dataclass
class Fault:
    status: int | str  # an HTTP status, or "drop" (close the connection unanswered)
    retry_after: float | None = None
    message: str | None = None
    error_type: str | None = None
    path: str = "/v1/messages"


class _APIError(Exception):
    def __init__(self, status: int, error_type: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.headers = headers or {}


class MessagesAPI:
    """The server. Use as a context manager; ``base_url`` is ``http://127.0.0.1:<port>``."""

    def __init__(
        self,
        responder: Callable[[dict[str, Any]], Any] | None = None,
        *,
        latency: float = 0.0,
        aliases: dict[str, str] | None = None,
        min_cache_tokens: int = 1024,
        cache_ttl: float = 300.0,
        batch_polls: int = 1,
        require_key: bool = True,
        models_api: bool = True,
        models_status: int = 404,
    ) -> None:
        self.responder = responder or ScriptResponder()
        self.models_api = models_api
        self.models_status = models_status
        self.latency = latency
        self.aliases = dict(DEFAULT_ALIASES if aliases is None else aliases)
        self.min_cache_tokens = min_cache_tokens
        self.cache_ttl = cache_ttl
        self.batch_polls = batch_polls
        self.require_key = require_key
        self.requests: list[dict[str, Any]] = []
        self.served: list[tuple[dict[str, Any], Usage]] = []
        """(request body, usage) of every message answered, in order: what a client was served and
        billed."""
        self.calls: list[Call] = []
        self.faults: list[Fault] = []
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_errors: dict[str, tuple[str, str]] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self._cache: dict[str, float] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------------------------- lifecycle

    def __enter__(self) -> MessagesAPI:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        api = self

        class Handler(_Handler):
            owner = api

        server = _Server(("127.0.0.1", 0), Handler)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="messages-api", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the server first (use it as a context manager)"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # ------------------------------------------------------------------------------------ knobs

    def inject(
        self,
        status: int | str,
        *,
        times: int = 1,
        retry_after: float | None = None,
        message: str | None = None,
        error_type: str | None = None,
        path: str = "/v1/messages",
    ) -> None:
        """Make the next ``times`` requests to ``path`` fail with ``status`` (or ``"drop"``)."""
        with self._lock:
            for _ in range(times):
                self.faults.append(Fault(status, retry_after, message, error_type, path))

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    def resolve(self, model: str) -> str:
        if model in self.aliases:
            return self.aliases[model]
        if model in self.aliases.values() or re.fullmatch(r"claude-[a-z0-9.-]+-\d{8}", model):
            return model
        if re.fullmatch(r"claude-[a-z0-9.-]+", model):
            return f"{model}-{SYNTHETIC_SNAPSHOT}"
        raise _APIError(404, "not_found_error", f"model: {model}")

    @property
    def message_requests(self) -> list[Call]:
        return [c for c in self.calls if c.method == "POST" and c.path == "/v1/messages"]

    # ---------------------------------------------------------------------------------- helpers

    def _take_fault(self, path: str) -> Fault | None:
        with self._lock:
            for i, f in enumerate(self.faults):
                if f.path == path:
                    return self.faults.pop(i)
        return None

    def _usage(self, body: dict[str, Any], model: str) -> dict[str, int]:
        segs = _segments(body)
        total = sum(t for t, _, _ in segs)
        breakpoints: list[tuple[int, str]] = []  # (tokens up to and including, prefix hash)
        h = hashlib.sha256(model.encode())
        running = 0
        for tokens, bp, canon in segs:
            h.update(canon.encode())
            running += tokens
            if bp:
                breakpoints.append((running, h.copy().hexdigest()))
        now = time.monotonic()
        read = 0
        written_upto = 0
        with self._lock:
            cacheable = [(n, key) for n, key in breakpoints if n >= self.min_cache_tokens]
            for n, key in reversed(cacheable):
                seen = self._cache.get(key)
                if seen is not None and now - seen < self.cache_ttl:
                    read = n
                    break
            for n, key in cacheable:
                self._cache[key] = now
                written_upto = max(written_upto, n)
        creation = max(0, written_upto - read)
        return {
            "input_tokens": total - read - creation,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
        }

    def _validate(self, body: Any) -> None:
        if not isinstance(body, dict):
            raise _APIError(400, "invalid_request_error", "body: expected an object")
        for key in ("model", "max_tokens", "messages"):
            if key not in body:
                raise _APIError(400, "invalid_request_error", f"{key}: Field required")
        msgs = body["messages"]
        if not isinstance(msgs, list) or not msgs:
            raise _APIError(400, "invalid_request_error", "messages: at least one message is required")
        if msgs[0].get("role") != "user":
            raise _APIError(400, "invalid_request_error", "messages: first message must use the user role")
        pending: set[str] = set()
        for i, m in enumerate(msgs):
            content = m.get("content")
            blocks = [] if isinstance(content, str) else list(content or [])
            if m.get("role") == "user":
                answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
                if pending - answered:
                    raise _APIError(
                        400,
                        "invalid_request_error",
                        f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                        f"immediately after: {', '.join(sorted(pending - answered))}",
                    )
                pending = set()
            else:
                pending = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
        for tool in body.get("tools") or []:
            if not isinstance(tool, dict) or "name" not in tool:
                raise _APIError(400, "invalid_request_error", "tools: each tool needs a name")

    def _reply_message(self, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """Run the responder; return the full message object and any extra delay."""
        self._validate(body)
        model = self.resolve(str(body["model"]))
        with self._lock:
            self.requests.append(body)
        try:
            raw = self.responder(body)
        except Exception as exc:  # a test's responder is broken: say so loudly, answer 500
            traceback.print_exc()
            raise _APIError(500, "api_error", f"stand-in responder failed: {exc!r}") from exc
        if raw is None:
            reply = text_reply()
        elif isinstance(raw, Reply):
            reply = raw
        elif isinstance(raw, str):
            reply = text_reply(raw)
        elif isinstance(raw, list):
            reply = Reply(raw)
        elif isinstance(raw, dict):
            with self._lock:
                self.served.append((body, _as_usage(raw.get("usage") or {})))
            return raw, 0.0
        else:  # pragma: no cover - a test's mistake
            raise TypeError(f"responder returned {type(raw).__name__}")
        stop = reply.stop_reason or (
            "tool_use" if any(b.get("type") == "tool_use" for b in reply.content) else "end_turn"
        )
        usage = self._usage(body, model)
        usage["output_tokens"] = reply.output_tokens or count_tokens(reply.content)
        message = {
            "id": "msg_" + uuid.uuid4().hex[:24],
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": reply.content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        with self._lock:
            self.served.append((body, _as_usage(usage)))
        return message, reply.delay


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # read by listen() in the constructor: a burst of connects must not overflow


class _Handler(BaseHTTPRequestHandler):
    owner: MessagesAPI
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

    def log_message(self, format: str, *args: Any) -> None:
        return

    # ----------------------------------------------------------------------------------- plumbing

    def _read_body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _APIError(400, "invalid_request_error", f"body: invalid JSON ({exc.msg})") from exc

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode()
        self._send_bytes(status, data, "application/json", headers)

    def _send_bytes(
        self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_" + uuid.uuid4().hex[:24])
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.call.status = status
        self.call.answered = time.time()

    def _send_error(self, err: _APIError) -> None:
        body = {"type": "error", "error": {"type": err.error_type, "message": err.message}}
        self._send_json(err.status, body, err.headers)

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        self.call.status = -1

    def _handle(self, method: str) -> None:
        api = self.owner
        path = self.path.split("?", 1)[0]
        self.call = Call(method, path, {k.lower(): v for k, v in self.headers.items()}, None)
        try:
            body = self._read_body() if method == "POST" else None
        except _APIError as err:
            body = None
            with api._lock:
                api.calls.append(self.call)
            self._send_error(err)
            return
        self.call.body = body
        with api._lock:
            api.calls.append(self.call)
        try:
            if api.require_key and not (self.headers.get("x-api-key") or self.headers.get("authorization")):
                raise _APIError(401, "authentication_error", "x-api-key header is required")
            fault = api._take_fault(path)
            if fault is not None:
                if fault.status == "drop":
                    self._drop()
                    return
                status = int(fault.status)
                headers = {"retry-after": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
                raise _APIError(
                    status,
                    fault.error_type or HTTP_ERROR_TYPES.get(status, "api_error"),
                    fault.message or f"injected {status}",
                    headers,
                )
            self._route(method, path, body)
        except _APIError as err:
            self._send_error(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    # ------------------------------------------------------------------------------------- routes

    def _route(self, method: str, path: str, body: Any) -> None:
        api = self.owner
        if method == "POST" and path == "/v1/messages":
            self._messages(body)
        elif method == "POST" and path == "/v1/messages/count_tokens":
            api._validate({**(body or {}), "max_tokens": 1})
            self._send_json(200, {"input_tokens": sum(t for t, _, _ in _segments(body))})
        elif method == "POST" and path == "/v1/messages/batches":
            self._create_batch(body)
        elif method == "GET" and (m := re.fullmatch(r"/v1/messages/batches/([\w-]+)", path)):
            self._send_json(200, self._retrieve_batch(m.group(1)))
        elif method == "GET" and (m := re.fullmatch(r"/v1/messages/batches/([\w-]+)/results", path)):
            self._batch_results(m.group(1))
        elif method == "GET" and path.startswith("/v1/models") and not api.models_api:
            raise _APIError(api.models_status, "not_found_error", "File Not Found")
        elif method == "GET" and (m := re.fullmatch(r"/v1/models/([\w.:-]+)", path)):
            resolved = api.resolve(m.group(1))
            self._send_json(
                200,
                {
                    "type": "model",
                    "id": resolved,
                    "display_name": resolved,
                    "created_at": "2025-01-01T00:00:00Z",
                },
            )
        else:
            raise _APIError(404, "not_found_error", f"Not found: {method} {path}")

    def _messages(self, body: Any) -> None:
        api = self.owner
        with api._lock:
            api.in_flight += 1
            api.max_in_flight = max(api.max_in_flight, api.in_flight)
        try:
            message, delay = api._reply_message(body)
            if api.latency or delay:  # counted from the request's arrival, as a server's latency is
                time.sleep(max(0.0, self.call.at + api.latency + delay - time.time()))
        finally:
            with api._lock:
                api.in_flight -= 1
        if body.get("stream"):
            self._stream(message)
        else:
            self._send_json(200, message)

    def _stream(self, message: dict[str, Any]) -> None:
        usage = message["usage"]
        start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        chunks = [_sse("message_start", {"type": "message_start", "message": start})]
        chunks.append(_sse("ping", {"type": "ping"}))
        for i, block in enumerate(message["content"]):
            if block.get("type") == "tool_use":
                empty = {**block, "input": {}}
                chunks.append(
                    _sse(
                        "content_block_start",
                        {"type": "content_block_start", "index": i, "content_block": empty},
                    )
                )
                js = json.dumps(block.get("input", {}), separators=(",", ":"))
                for part in (js[: len(js) // 2], js[len(js) // 2 :]):
                    chunks.append(
                        _sse(
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": i,
                                "delta": {"type": "input_json_delta", "partial_json": part},
                            },
                        )
                    )
            else:
                text = str(block.get("text", ""))
                chunks.append(
                    _sse(
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {"type": "text", "text": ""},
                        },
                    )
                )
                for part in (text[: len(text) // 2], text[len(text) // 2 :]):
                    chunks.append(
                        _sse(
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": i,
                                "delta": {"type": "text_delta", "text": part},
                            },
                        )
                    )
            chunks.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
        chunks.append(
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            )
        )
        chunks.append(_sse("message_stop", {"type": "message_stop"}))
        data = b"".join(chunks)
        self._send_bytes(200, data, "text/event-stream")

    # ------------------------------------------------------------------------------------ batches

    def _create_batch(self, body: Any) -> None:
        api = self.owner
        reqs = (body or {}).get("requests")
        if not isinstance(reqs, list) or not reqs:
            raise _APIError(400, "invalid_request_error", "requests: at least one request is required")
        ids = [r.get("custom_id") for r in reqs]
        if len(set(ids)) != len(ids):
            raise _APIError(400, "invalid_request_error", "requests: custom_id values must be unique")
        results: list[dict[str, Any]] = []
        for r in reqs:
            cid = r["custom_id"]
            params = dict(r.get("params") or {})
            try:
                if cid in api.batch_errors:
                    etype, msg = api.batch_errors.pop(cid)
                    raise _APIError(500, etype, msg)
                if params.get("stream"):
                    raise _APIError(400, "invalid_request_error", "stream: not supported in batches")
                message, _ = api._reply_message(params)
                results.append({"custom_id": cid, "result": {"type": "succeeded", "message": message}})
            except _APIError as err:
                results.append(
                    {
                        "custom_id": cid,
                        "result": {
                            "type": "errored",
                            "error": {
                                "type": "error",
                                "error": {"type": err.error_type, "message": err.message},
                            },
                        },
                    }
                )
        batch_id = "msgbatch_" + uuid.uuid4().hex[:24]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        batch = {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {
                "processing": len(reqs),
                "succeeded": 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            },
            "created_at": now,
            "expires_at": now,
            "ended_at": None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": None,
        }
        with api._lock:
            api.batches[batch_id] = {"batch": batch, "results": results, "polls": 0, "requests": reqs}
        self._send_json(200, batch)

    def _retrieve_batch(self, batch_id: str) -> dict[str, Any]:
        api = self.owner
        with api._lock:
            entry = api.batches.get(batch_id)
            if entry is None:
                raise _APIError(404, "not_found_error", f"message batch {batch_id} not found")
            entry["polls"] += 1
            batch = entry["batch"]
            if entry["polls"] > api.batch_polls and batch["processing_status"] != "ended":
                results = entry["results"]
                ok = sum(1 for r in results if r["result"]["type"] == "succeeded")
                batch["processing_status"] = "ended"
                batch["ended_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                batch["request_counts"] = {
                    "processing": 0,
                    "succeeded": ok,
                    "errored": len(results) - ok,
                    "canceled": 0,
                    "expired": 0,
                }
                batch["results_url"] = f"{api.base_url}/v1/messages/batches/{batch_id}/results"
            return dict(batch)

    def _batch_results(self, batch_id: str) -> None:
        api = self.owner
        with api._lock:
            entry = api.batches.get(batch_id)
            if entry is None:
                raise _APIError(404, "not_found_error", f"message batch {batch_id} not found")
            if entry["batch"]["processing_status"] != "ended":
                raise _APIError(400, "invalid_request_error", "batch is still processing")
            lines = [json.dumps(r, separators=(",", ":")) for r in entry["results"]]
        self._send_bytes(200, ("\n".join(lines) + "\n").encode(), "application/binary")


def main(argv: list[str] | None = None) -> int:
    """Run the stand-in in its own process: prints ``base_url`` on the first line, serves until stdin closes.

    ``python -m tests.fakes.messages_api [--latency S] [--script FILE.json] [--min-cache-tokens N]
    [--record FILE.jsonl]`` (the script is a :class:`ScriptResponder` mapping; ``--record`` writes every
    Messages request body received, one JSON line each, when it stops — what a benchmark replays with
    a bare HTTP client). Benchmarks use it to keep the server off the client's interpreter lock.
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="messages_api")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--script", default=None)
    parser.add_argument("--min-cache-tokens", type=int, default=1024)
    parser.add_argument("--record", default=None)
    args = parser.parse_args(argv)
    script = {}
    if args.script:
        with open(args.script, encoding="utf-8") as fh:
            script = json.load(fh)
    with MessagesAPI(
        ScriptResponder(script), latency=args.latency, min_cache_tokens=args.min_cache_tokens
    ) as api:
        print(api.base_url, flush=True)
        sys.stdin.read()
        if args.record:
            with open(args.record, "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps(body) + "\n" for body in api.requests)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
