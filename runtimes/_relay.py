"""The probe's own relay to the model: what an agent CLI was served, and in what order the model called.

Codex, Gemini CLI, OpenCode, Copilot CLI and pi say too little, or too late, in their own output to
record a probe exactly: OpenCode reports a step's tokens only after its tool calls have run (a probe
stopped at the target has none), Gemini CLI only at the very end, Copilot CLI never; pi counts a turn
once it has read the reply, and its next request is out before a kill at its target lands; Codex and
OpenCode run the tool calls of one model response at once and report them in the order they finish,
not in the model's.
So each probe runs its CLI against a :class:`ModelRelay`: a small HTTP server on 127.0.0.1 that forwards
every request to the real endpoint (``base_url``; HTTPS, proxies and certificates as ``httpx`` reads
them from the environment) and passes each response back as it streams, reading on the way

- each model response's **usage** (the API's own counts: what was served and billed) and its **tool
  calls in the model's order**, into an :class:`Exchange`;
- the moment the CLI asks for the **next model turn**: :attr:`ModelRelay.admit` decides whether that
  request goes out at all. A probe that has stopped (its target loaded) never lets it go: the request is
  held, unanswered, until the CLI is ended, so it is never paid for.

A response the CLI stops reading (the probe ended it) is still read to its end from the server, so its
usage is known. :class:`ModelOrder` matches a CLI's "skill loaded" events with the model's calls, so the
skills are credited in the order the model called them, whatever order the CLI finished them in.

Only the wire formats these CLIs speak are read: the Responses API (``responses``), Chat Completions
(``chat``), the Gemini API (``gemini``) and the Anthropic Messages API (``messages``, pi's), streamed
(server-sent events) or not. Nothing
is logged of a request or a response: keys pass through in their headers and are never kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import urlsplit

from skillreach.models import Usage

__all__ = ["Exchange", "ModelOrder", "ModelRelay", "Sequencer", "Wire", "is_model_path"]

log = logging.getLogger("skillreach.runtimes.relay")

Wire = Literal["responses", "chat", "gemini", "messages"]

MAX_BODY = 64 * 2**20
"""The largest request body relayed (a long conversation with a big catalog is a few MiB)."""
MAX_EVENT = 16 * 2**20
"""The longest server-sent event (or non-streamed response body) read for usage and calls."""
MAX_ARGUMENTS = 2**20
"""The longest tool-call argument string kept."""
_HOP = frozenset(
    {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
        "trailers", "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding",
        "content-encoding",
    }
)  # fmt: skip


@dataclass
class Exchange:
    """One model request the CLI made through the relay, and what came back."""

    index: int
    """0 for the CLI's first model request, 1 for its second …"""
    status: int | None = None
    """The server's HTTP status; None while unanswered, or when held or never answered."""
    held: bool = False
    """Never forwarded: the probe had stopped when the CLI asked for this turn."""
    complete: bool = False
    """The whole response was read (its usage, when the API sends one, is known)."""
    usage: Usage | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Tool calls of the response, in the model's order."""
    model: str | None = None

    @property
    def served(self) -> bool:
        """A model turn the server answered in full (a turn of the probe)."""
        return self.complete and self.status is not None and 200 <= self.status < 300


# =============================================================================== reading responses


class _Reader:
    """Usage, tool calls and model of one response, read as its bytes pass (SSE or one JSON body)."""

    def __init__(self, wire: Wire, exchange: Exchange, lock: threading.Lock) -> None:
        self.wire = wire
        self.exchange = exchange
        self.lock = lock
        self.sse: bool | None = None
        self.buffer = bytearray()
        self.data: list[bytes] = []
        self.chat_calls: dict[int, list[str]] = {}
        self.chat_order: list[int] = []
        self.blocks: dict[int, list[str]] = {}
        """Messages API: the tool_use blocks still streaming, by index: [name, input JSON so far]."""
        self.counts: dict[str, int] = {}
        """Messages API: the usage counts so far (``message_start``'s, then ``message_delta``'s)."""
        self.too_long = False
        self.failed = False
        """The response ended in the API's own error (a Messages stream's ``error`` event): not a turn."""

    def feed(self, chunk: bytes) -> None:
        if self.too_long:
            return
        self.buffer += chunk
        if self.sse is False:
            if len(self.buffer) > MAX_EVENT:
                self.too_long = True
            return
        while (end := self.buffer.find(b"\n")) != -1:
            line = bytes(self.buffer[:end]).rstrip(b"\r")
            del self.buffer[: end + 1]
            self._line(line)
        if len(self.buffer) > MAX_EVENT:
            self.too_long = True

    def _line(self, line: bytes) -> None:
        if not line:
            self._event()
        elif line.startswith(b"data:"):
            self.data.append(line[5:].lstrip(b" "))
        if sum(map(len, self.data)) > MAX_EVENT:
            self.too_long = True

    def _event(self) -> None:
        if not self.data:
            return
        raw = b"\n".join(self.data)
        self.data = []
        if raw.strip() == b"[DONE]":  # the stream's end: its calls are whole before the CLI reads it
            self._chat_done()
            return
        try:
            event = json.loads(raw)
        except (ValueError, RecursionError):
            return
        self.take(event)

    def finish(self) -> None:
        """The response ended: read what is left (a last event, or the whole non-streamed body)."""
        if self.too_long:
            return
        if self.sse is False:
            try:
                body = json.loads(bytes(self.buffer))
            except (ValueError, RecursionError):
                return
            for event in body if isinstance(body, list) else [body]:  # Gemini's streamed JSON array
                self.take(event)
            return
        if self.buffer:
            self._line(bytes(self.buffer).rstrip(b"\r"))
        self._event()
        self._chat_done()

    # --------------------------------------------------------------------------------- per wire
    def take(self, event: Any) -> None:
        if not isinstance(event, dict):
            return
        if self.wire == "responses":
            self._responses(event)
        elif self.wire == "chat":
            self._chat(event)
        elif self.wire == "messages":
            self._messages(event)
        else:
            self._gemini(event)

    def _set(self, *, usage: Usage | None = None, call: tuple[str, dict[str, Any]] | None = None,
             model: Any = None) -> None:  # fmt: skip
        with self.lock:
            if usage is not None:
                self.exchange.usage = usage
            if call is not None:
                self.exchange.calls.append(call)
            if isinstance(model, str) and model:
                self.exchange.model = model

    def _responses(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            self._responses_item(event["item"])
        elif kind in ("response.completed", "response.incomplete") or (kind is None and "output" in event):
            response = event.get("response") if kind else event
            if not isinstance(response, dict):
                return
            if kind is None:  # a non-streamed response: its items are here
                for item in response.get("output") or []:
                    if isinstance(item, dict):
                        self._responses_item(item)
            usage = response.get("usage")
            if isinstance(usage, dict):
                cached = _count((usage.get("input_tokens_details") or {}).get("cached_tokens"))
                self._set(
                    usage=Usage(
                        input_tokens=max(_count(usage.get("input_tokens")) - cached, 0),
                        output_tokens=_count(usage.get("output_tokens")),
                        cache_read_input_tokens=cached,
                    ),
                    model=response.get("model"),
                )

    def _responses_item(self, item: dict[str, Any]) -> None:
        if item.get("type") == "function_call":
            self._set(call=(str(item.get("name") or ""), _arguments(item.get("arguments"))))
        elif item.get("type") == "custom_tool_call":
            self._set(call=(str(item.get("name") or ""), {"input": str(item.get("input") or "")}))

    def _chat(self, event: dict[str, Any]) -> None:
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            message = choice.get("delta") if "delta" in choice else choice.get("message")
            for n, call in enumerate((message or {}).get("tool_calls") or []):
                if not isinstance(call, dict):
                    continue
                index = call.get("index", n)
                index = index if isinstance(index, int) else n
                fn = call.get("function") or {}
                if index not in self.chat_calls:
                    self.chat_calls[index] = ["", ""]
                    self.chat_order.append(index)
                parts = self.chat_calls[index]
                if fn.get("name"):
                    parts[0] = str(fn["name"])
                if isinstance(fn.get("arguments"), str) and len(parts[1]) < MAX_ARGUMENTS:
                    parts[1] += fn["arguments"]
            if "message" in choice:
                self._chat_done()
        usage = event.get("usage")
        if isinstance(usage, dict):
            cached = _count((usage.get("prompt_tokens_details") or {}).get("cached_tokens"))
            self._set(
                usage=Usage(
                    input_tokens=max(_count(usage.get("prompt_tokens")) - cached, 0),
                    output_tokens=_count(usage.get("completion_tokens")),
                    cache_read_input_tokens=cached,
                ),
                model=event.get("model"),
            )
        elif event.get("model"):
            self._set(model=event.get("model"))
        if any(isinstance(c, dict) and c.get("finish_reason") for c in event.get("choices") or []):
            self._chat_done()

    def _chat_done(self) -> None:
        """The response's tool calls are whole (its finish reason came, or it ended): in the model's
        order, as their ``index`` says."""
        for index in self.chat_order:
            name, arguments = self.chat_calls[index]
            self._set(call=(name, _arguments(arguments)))
        self.chat_calls.clear()
        self.chat_order.clear()

    def _gemini(self, event: dict[str, Any]) -> None:
        for candidate in (event.get("candidates") or [])[:1]:
            content = candidate.get("content") if isinstance(candidate, dict) else None
            for part in (content or {}).get("parts") or []:
                call = part.get("functionCall") if isinstance(part, dict) else None
                if isinstance(call, dict):
                    args = call.get("args")
                    self._set(call=(str(call.get("name") or ""), args if isinstance(args, dict) else {}))
        meta = event.get("usageMetadata")
        if isinstance(meta, dict):
            cached = _count(meta.get("cachedContentTokenCount"))
            self._set(
                usage=Usage(
                    input_tokens=max(_count(meta.get("promptTokenCount")) - cached, 0),
                    output_tokens=_count(meta.get("candidatesTokenCount"))
                    + _count(meta.get("thoughtsTokenCount")),
                    cache_read_input_tokens=cached,
                ),
                model=event.get("modelVersion"),
            )

    def _messages(self, event: dict[str, Any]) -> None:
        """The Messages API: ``message_start`` carries the input side of the usage (and a placeholder
        output count), each ``tool_use`` block streams as ``content_block_start`` (name, id) and
        ``input_json_delta`` parts up to its ``content_block_stop``, ``message_delta``'s usage holds the
        final (cumulative) counts. A non-streamed response is one ``message`` object. The usage is taken
        only from a ``message_delta`` or a whole message: a stream cut off before it leaves it unknown.
        An ``error`` event ends the stream as no turn: nothing served when it came first, else unknown."""
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = event["message"]
            self._counts(message.get("usage"))
            self._set(model=message.get("model"))
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            block, index = event["content_block"], event.get("index")
            if block.get("type") == "tool_use" and isinstance(index, int):
                given = block.get("input")
                self.blocks[index] = [str(block.get("name") or ""), json.dumps(given) if given else ""]
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            delta, parts = event["delta"], self.blocks.get(event.get("index"))  # type: ignore[arg-type]
            text = delta.get("partial_json")
            streaming = parts is not None and delta.get("type") == "input_json_delta"
            if streaming and isinstance(text, str) and len(parts[1]) + len(text) <= MAX_ARGUMENTS:  # type: ignore[index]
                parts[1] += text  # type: ignore[index]
        elif kind == "content_block_stop":
            self._messages_call(event.get("index"))
        elif kind == "message_delta":
            self._counts(event.get("usage"))
            self._messages_usage()
        elif kind == "message_stop":
            for index in sorted(self.blocks):
                self._messages_call(index)
        elif kind == "error":  # overloaded mid-stream: no message; before message_start nothing was served
            self.failed = True
            if not self.counts:
                self._messages_usage()
        elif kind == "message" and "content" in event:  # a non-streamed response
            for block in event.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    given = block.get("input")
                    self._set(call=(str(block.get("name") or ""), given if isinstance(given, dict) else {}))
            self._set(model=event.get("model"))
            if isinstance(event.get("usage"), dict):
                self._counts(event["usage"])
                self._messages_usage()

    def _counts(self, usage: Any) -> None:
        if isinstance(usage, dict):
            for key in _MESSAGES_USAGE:
                if usage.get(key) is not None:
                    self.counts[key] = _count(usage.get(key))

    def _messages_usage(self) -> None:
        self._set(usage=Usage(**{key: self.counts.get(key, 0) for key in _MESSAGES_USAGE}))

    def _messages_call(self, index: Any) -> None:
        parts = self.blocks.pop(index, None) if isinstance(index, int) else None
        if parts is not None:
            self._set(call=(parts[0], _arguments(parts[1]) if parts[1] else {}))


_MESSAGES_USAGE = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
"""The Messages API's usage counts (input excludes the cache's two, as :class:`Usage` does)."""


def _count(value: Any) -> int:
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or len(raw) > MAX_ARGUMENTS:
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return {"arguments": raw}
    return value if isinstance(value, dict) else {"arguments": value}


def is_model_path(wire: Wire, path: str) -> bool:
    """Whether a request path asks the model for a turn (what is counted and may be held)."""
    bare = path.split("?", 1)[0].rstrip("/")
    if wire == "responses":
        return bare.endswith("/responses")
    if wire == "chat":
        return bare.endswith("/chat/completions")
    if wire == "messages":
        return bare.endswith("/messages")
    return bare.endswith((":generateContent", ":streamGenerateContent"))


# ======================================================================================= the relay


class ModelRelay:
    """A relay for one probe (see the module docstring); an async context manager.

    ``admit(index)`` (a coroutine run on the probe's event loop) is asked before each model request
    after the first: False holds the request until the relay closes, unforwarded."""

    def __init__(
        self,
        upstream: str,
        wire: Wire,
        *,
        admit: Callable[[int], Awaitable[bool]] | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"the model endpoint {upstream!r} is not an http(s) URL")
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.prefix = parts.path.rstrip("/")
        self.wire: Wire = wire
        self.admit = admit
        self.timeout_s = timeout_s
        self.exchanges: list[Exchange] = []
        self.requests = 0
        """Every request the CLI sent (model turns and anything else)."""
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._busy = 0
        self._idle = threading.Condition(self._lock)
        self._server: ThreadingHTTPServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None

    @property
    def base_url(self) -> str:
        """The URL the CLI is given instead of the endpoint's (same path)."""
        assert self._server is not None, "enter the relay first"
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.prefix}"

    def snapshot(self) -> list[Exchange]:
        """The exchanges so far (copies: the relay's threads go on filling the originals)."""
        with self._lock:
            return [
                Exchange(e.index, e.status, e.held, e.complete, e.usage, list(e.calls), e.model)
                for e in self.exchanges
            ]

    # ------------------------------------------------------------------------------- figures
    def usage(self) -> Usage:
        """What the server served: the usage of every model response, summed."""
        total = Usage()
        for exchange in self.snapshot():
            if exchange.usage is not None:
                total = total + exchange.usage
        return total

    def turns(self) -> int:
        """Model responses served in full."""
        return sum(1 for e in self.snapshot() if e.served)

    def unknown(self) -> bool:
        """A model request was forwarded whose usage was never read (cut off, or an API without one)."""
        return any(not e.held and e.status is not None and 200 <= e.status < 300 and e.usage is None
                   for e in self.snapshot())  # fmt: skip

    def model(self) -> str | None:
        """The model the server said it answered with (the last response that said one)."""
        named = [e.model for e in self.snapshot() if e.model]
        return named[-1] if named else None

    # ------------------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> ModelRelay:
        import httpx

        self._loop = asyncio.get_running_loop()
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 30.0)),
            follow_redirects=False,
            trust_env=True,
        )
        server = _Server(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    async def settle(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until no response is still being read from the server: a
        response the CLI stopped reading is read to its end, for its usage."""
        await asyncio.to_thread(self._wait_idle, timeout_s)

    def _wait_idle(self, timeout_s: float) -> None:
        with self._idle:
            self._idle.wait_for(lambda: self._busy == 0, timeout=max(timeout_s, 0.0))

    async def __aexit__(self, *exc: object) -> None:
        self._closed.set()  # held requests are dropped; reading from the server stops
        server, self._server = self._server, None
        if server is not None:
            await asyncio.to_thread(server.shutdown)
            server.server_close()
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()

    # ------------------------------------------------------------------------- one request
    def _admitted(self, index: int) -> bool:
        if self.admit is None or index == 0 or self._loop is None or self._loop.is_closed():
            return True
        try:
            future = asyncio.run_coroutine_threadsafe(self.admit(index), self._loop)
            return bool(future.result(timeout=self.timeout_s))
        except Exception:  # the probe is gone: nothing more goes out
            return False

    def relay(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        body = _read_body(handler)
        if body is None:
            handler.send_error(413 if handler.headers.get("content-length") else 400)
            return
        model_turn = is_model_path(self.wire, handler.path)
        exchange: Exchange | None = None
        with self._lock:
            self.requests += 1
            if model_turn:
                exchange = Exchange(index=len(self.exchanges))
                self.exchanges.append(exchange)
        if exchange is not None and not self._admitted(exchange.index):
            with self._lock:
                exchange.held = True
            self._closed.wait()  # never forwarded: the CLI is ended meanwhile
            handler.close_connection = True
            return
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
        headers["accept-encoding"] = "identity"
        with self._idle:
            self._busy += 1
        try:
            self._forward(handler, method, body, headers, exchange)
        finally:
            with self._idle:
                self._busy -= 1
                self._idle.notify_all()

    def _forward(
        self,
        handler: BaseHTTPRequestHandler,
        method: str,
        body: bytes,
        headers: dict[str, str],
        exchange: Exchange | None,
    ) -> None:
        url = self.origin + handler.path
        client_gone = answered = False
        try:
            with self._client.stream(method, url, headers=headers, content=body) as response:
                if exchange is not None:
                    with self._lock:
                        exchange.status = response.status_code
                reader = _Reader(self.wire, exchange, self._lock) if exchange is not None else None
                if reader is not None:
                    kind = response.headers.get("content-type", "")
                    reader.sse = "event-stream" in kind
                handler.send_response(response.status_code)
                for key, value in response.headers.multi_items():
                    if key.lower() not in _HOP:
                        handler.send_header(key, value)
                handler.send_header("transfer-encoding", "chunked")
                handler.end_headers()
                answered = True
                for chunk in response.iter_bytes():
                    if self._closed.is_set():
                        return
                    if reader is not None:
                        reader.feed(chunk)
                    if not client_gone and chunk:
                        client_gone = not _write(handler, b"%x\r\n%s\r\n" % (len(chunk), chunk))
                if reader is not None:
                    reader.finish()
                    with self._lock:
                        exchange.complete = not reader.failed  # type: ignore[union-attr]
                if not client_gone:
                    _write(handler, b"0\r\n\r\n")
        except Exception as exc:  # the server could not be reached, or broke off
            log.debug("relay: %s %s failed: %s", method, handler.path.split("?", 1)[0], type(exc).__name__)
            if not answered:
                with contextlib.suppress(Exception):
                    handler.send_error(502, "the model endpoint could not be reached")
            handler.close_connection = True


def _write(handler: BaseHTTPRequestHandler, data: bytes) -> bool:
    try:
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError, OSError):
        return False
    return True


def _read_body(handler: BaseHTTPRequestHandler) -> bytes | None:
    """The request's body (by ``content-length``, or chunked), None past :data:`MAX_BODY`."""
    if "chunked" in handler.headers.get("transfer-encoding", "").lower():
        out = bytearray()
        while True:
            size_line = handler.rfile.readline(1024)
            try:
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            except ValueError:
                return None
            if size == 0:
                while handler.rfile.readline(65536) not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            if len(out) + size > MAX_BODY:
                return None
            out += handler.rfile.read(size)
            handler.rfile.readline(1024)
    try:
        length = int(handler.headers.get("content-length") or 0)
    except ValueError:
        return None
    if length < 0 or length > MAX_BODY:
        return None
    return handler.rfile.read(length) if length else b""


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("relay: a connection from %s ended mid-request", client_address)


def _handler(relay: ModelRelay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            relay.relay(self, "POST")

        def do_GET(self) -> None:
            relay.relay(self, "GET")

        def do_PUT(self) -> None:
            relay.relay(self, "PUT")

        def do_DELETE(self) -> None:
            relay.relay(self, "DELETE")

    return Handler


# ============================================================================ the model's order


class ModelOrder:
    """Skills credited in the order the model called them.

    The relay gives each model response's calls in order; ``skill_of(name, args)`` says which catalog
    skill a call loads (None for any other call). The CLI's own events say when a skill was loaded
    (:meth:`loaded`) or failed to load (:meth:`failed`), in whatever order its tool calls finished; a
    skill is credited once every skill call before it in the model's order is resolved. When the CLI
    asks for its next turn (:meth:`settle`), every call of the earlier responses is resolved: one it
    never reported is taken as not loaded. A load reported before the relay has read its call (a call
    whose arguments were still streaming) takes its place after the calls read so far.
    """

    def __init__(self, skill_of: Callable[[str, dict[str, Any]], str | None]) -> None:
        self.skill_of = skill_of
        self.planned: list[tuple[int, str]] = []
        """(response index, skill) of each skill call, in the model's order."""
        self.state: list[bool | None] = []
        """Per planned call: True loaded, False not loaded, None not yet reported."""
        self._taken: dict[int, int] = {}
        self._early: dict[str, int] = {}
        self._last = 0
        self._next = 0

    def sync(self, exchanges: list[Exchange]) -> None:
        """Take the calls the relay has read since the last look."""
        for exchange in exchanges:
            self._last = max(self._last, exchange.index)
            seen = self._taken.get(exchange.index, 0)
            for name, args in exchange.calls[seen:]:
                skill = self.skill_of(name, args)
                if skill is None:
                    continue
                if self._early.get(skill):
                    self._early[skill] -= 1  # reported already: it holds its place
                    continue
                self.planned.append((exchange.index, skill))
                self.state.append(None)
            self._taken[exchange.index] = len(exchange.calls)

    def loaded(self, skill: str) -> list[str]:
        """The CLI loaded ``skill``: the skills now due, in order."""
        for i in range(self._next, len(self.planned)):
            if self.state[i] is None and self.planned[i][1] == skill:
                self.state[i] = True
                return self._due()
        self._early[skill] = self._early.get(skill, 0) + 1
        self.planned.append((self._last, skill))
        self.state.append(True)
        return self._due()

    def failed(self, skill: str) -> list[str]:
        """The CLI could not load ``skill``: the skills now due."""
        for i in range(self._next, len(self.planned)):
            if self.state[i] is None and self.planned[i][1] == skill:
                self.state[i] = False
                break
        return self._due()

    def pending(self, before: int | None = None) -> bool:
        """A skill call (of a response before ``before``) not yet reported by the CLI."""
        return any(
            state is None and (before is None or index < before)
            for (index, _), state in zip(self.planned[self._next :], self.state[self._next :], strict=True)
        )

    def settle(self, before: int | None = None) -> list[str]:
        """Every call of the responses before ``before`` (all, when None) is resolved: the ones the CLI
        never reported were not loaded. The skills now due."""
        for i in range(self._next, len(self.planned)):
            if self.state[i] is None and (before is None or self.planned[i][0] < before):
                self.state[i] = False
        return self._due()

    def _due(self) -> list[str]:
        out: list[str] = []
        while self._next < len(self.planned) and self.state[self._next] is not None:
            if self.state[self._next]:
                out.append(self.planned[self._next][1])
            self._next += 1
        return out


class Sequencer:
    """One probe's skill loads, credited in the model's order (:class:`ModelOrder`), and the relay's
    question before each next turn (:meth:`admit`).

    ``credit(skill)`` reports a load to the probe's tracker (False: stop now); once a credit says stop,
    :attr:`ending` is set (the CLI is ended) and nothing more is credited. Each event the CLI prints
    calls :meth:`poke`, so :meth:`admit` can wait for the reports of the calls it runs."""

    def __init__(
        self,
        credit: Callable[[str], bool],
        skill_of: Callable[[str, dict[str, Any]], str | None],
        *,
        settle_s: float = 5.0,
    ) -> None:
        self.order = ModelOrder(skill_of)
        self.credit = credit
        self.settle_s = settle_s
        self.relay: ModelRelay | None = None
        self.ending = asyncio.Event()
        self._progress = asyncio.Event()

    @property
    def stopped(self) -> bool:
        return self.ending.is_set()

    def poke(self) -> None:
        self._progress.set()

    def _sync(self) -> None:
        if self.relay is not None:
            self.order.sync(self.relay.snapshot())

    def _give(self, due: list[str]) -> None:
        for skill in due:
            if self.ending.is_set():
                return
            if not self.credit(skill):
                self.ending.set()

    def loaded(self, skill: str) -> None:
        """The CLI says it loaded ``skill``."""
        self._sync()
        self._give(self.order.loaded(skill))
        self.poke()

    def failed(self, skill: str) -> None:
        """The CLI says it could not load ``skill``."""
        self._sync()
        self._give(self.order.failed(skill))
        self.poke()

    def stop(self) -> None:
        self.ending.set()

    async def admit(self, index: int) -> bool:
        """May the CLI's model request ``index`` go out? Waits (at most ``settle_s``) for the CLI to
        report every skill call of the earlier responses, credits them in the model's order, and says
        no once the probe has stopped."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settle_s
        self._sync()
        while not self.ending.is_set() and self.order.pending(before=index):
            left = deadline - loop.time()
            if left <= 0:
                break
            self._progress.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._progress.wait(), left)
            self._sync()
        self._give(self.order.settle(before=index))
        return not self.ending.is_set()

    def finish(self) -> None:
        """The CLI has ended: what it loaded is credited, in the model's order."""
        self._sync()
        self._give(self.order.settle())
