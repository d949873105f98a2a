"""``anthropic``: the Messages API through the official SDK, one tool ``Skill``, progressive disclosure.

The model sees one tool, ``Skill`` (input ``{"skill": "<name>"}``), whose description lists every
resident skill's name and description; no request carries a skill body before the model invoked that
skill, and invoking it returns the body as the ``tool_result``. The probe ends at the expected skill
(early exit), after ``max_turns`` invocations (the shared :class:`~skillreach.study.contract.Tracker`
decides), or
when the model stops calling ``Skill``.

What it takes care of:

- **Prompt caching**: the stable prefix (the tool with the listing, the system prompt) carries
  ``cache_control``, so every probe of a catalog after the first reads it from cache; from turn 2 on the
  conversation so far is cached too. Usage per probe keeps cache-creation and cache-read tokens, and the
  cost comes from ``Settings.price_for(model)`` (half price in batch mode).
- **Retries**: the SDK's own retries are off (``max_retries=0``); :mod:`runtimes._retry` retries 429,
  529, 5xx, 408/409, timeouts and dropped connections with exponential backoff and jitter, honouring
  ``retry-after``, at most ``max_retries`` times. A non-retryable 4xx fails the probe at once with the
  API's message. Failures become the probe's ``error``, never an empty selection.
- **Limits**: a semaphore bounds requests in flight; token buckets bound requests and input tokens per
  minute (``requests_per_minute``, ``input_tokens_per_minute``).
- **Client CPU**: at high concurrency the client's own CPU per request is the limit. The request body
  is JSON bytes whose stable part — system prompt and tool listing, ~30 KB for 100 skills — is
  serialised once per catalog, not once per request. With aiohttp installed (``anthropic[aiohttp]``,
  ``http="auto"`` or ``"aiohttp"``) and a static key or token, each Messages request is one POST on a
  shared aiohttp session (:class:`DirectPost`: a keep-alive pool as large as the concurrency) with the
  headers and URL the SDK client would send, taken from it once; a status error is built by the SDK
  from the response and a connection failure wrapped as the SDK does, so errors translate exactly as
  on the SDK's path. The SDK's request builder (options models, header merging, URL parsing, its
  httpx2 layer) costs ~1.3 ms of CPU a request, the direct POST ~0.6 ms (``bench/probe_throughput.py
  --paths``). ``direct=False``, OAuth credentials, an injected ``client`` or ``http="httpx"`` (the
  SDK default, used when aiohttp is not installed) keep the SDK's own path
  (``client.post("/v1/messages", content=...)``). Batches and ``/v1/models`` always use the SDK.
- **Batch mode** (``batch=True``): requests go through the Message Batches API — turn 1 of every probe
  in flight in one batch, then one batch per further turn for the probes still going, polled with
  backoff. Run it with every probe in flight at once (``run_probes`` does so: ``wants_all_probes``).
- **Model snapshot**: the dated id behind an alias (the response's ``model``; ``/v1/models/{id}`` when
  the response echoes the alias) is recorded on every probe; :meth:`AnthropicRuntime.resolve_model`
  gives it before a run (for the study's fingerprint). A server without the Models API (llama.cpp,
  many gateways: ``/v1/models/{id}`` answers 404 or 405) is told apart from a wrong model by one
  small Messages request (``max_tokens`` 1): the snapshot is the ``model`` its response reports,
  said in one line; a wrong model fails that request too.
- **A reply budget for a decision**: a routing request asks for at most ``routing_max_tokens``
  (:class:`~skillreach.study.contract.ProbeOptions`, default 256) output tokens: a model that answers
  in prose instead of calling ``Skill`` stops early. Compliance mode (and ``keep_answer``) keeps
  ``max_tokens`` before the skill loads and ``compliance_max_tokens`` after.
- **Forced choice** (``tool_choice="any"``): routing requests carry ``tool_choice: {"type": "any"}``,
  so the model must load some skill ("which would you load if you had to"); abstention is then not
  measured (the reports say so). Requests after the expected skill loaded (compliance) are free.
- **Compliance mode** (``ProbeOptions.compliance``): once the expected skill is loaded the conversation
  goes on with Bash, Read, Write and Edit offered (:mod:`runtimes._toolenv`); calls are recorded, never
  executed, and answered from ``query.checks.tool_results``; it ends at ``end_turn`` or
  ``step_budget`` requests, and the last text after the skill loaded is kept as ``final_text``
  (``""`` when the agent ended with none).

The key and endpoint come from ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL`` exactly as the SDK reads
them (or ``api_key=`` / ``base_url=``); the key is never logged or recorded.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import math
import os
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import anthropic
import orjson

from skillreach.errors import ConfigError, ProbeFailed, TransientProbeError
from skillreach.models import Catalog, Query, Usage
from skillreach.runtimes._anthropic_common import translate_error, usage_of, within_deadline
from skillreach.runtimes._ratelimit import limiter
from skillreach.runtimes._retry import RetryPolicy, retrying
from skillreach.runtimes._skilltool import (
    SYSTEM_PROMPT,
    SkillDialogue,
    blind_hint,
    endpoint_error,
    reply_budget,
    skill_tool,
)
from skillreach.runtimes._toolenv import TOOL_SCHEMAS
from skillreach.runtimes._version import package_version
from skillreach.settings import Settings
from skillreach.study.contract import (
    Outcome,
    ProbeOptions,
    RuntimeOptions,
    Tracker,
    cost_of,
    default_settings,
)

__all__ = [
    "DEFAULT_MODEL",
    "SYSTEM_PROMPT",
    "AnthropicOptions",
    "AnthropicRuntime",
    "DirectPost",
    "SdkInternals",
    "classify_error",
    "cost_of",
    "estimate_request_tokens",
    "sdk_internals",
    "skill_tool",
]

log = logging.getLogger("skillreach.runtimes.anthropic")

DEFAULT_MODEL = "claude-sonnet-4-6"
_NO_KEY = "the anthropic runtime needs an API key: set ANTHROPIC_API_KEY (or run offline: --runtime keyword)"
CACHE = {"type": "ephemeral"}
CONNECTIONS_PER_CLIENT = 8


def estimate_request_tokens(params: dict[str, Any]) -> int:
    """A cheap upper-bound estimate of a request's input tokens (~4 characters a token)."""
    size = sum(
        len(json.dumps(params.get(k, ""), ensure_ascii=False)) for k in ("system", "tools", "messages")
    )
    return max(1, math.ceil(size / 4))


def classify_error(exc: BaseException) -> ProbeFailed | None:
    """Translate an SDK exception: transient (retry) or final; ``None`` when it is not the SDK's
    (:func:`runtimes._anthropic_common.translate_error`, shared with the judge and the generator)."""
    return translate_error(exc)


def _block_to_param(block: dict[str, Any]) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    if kind == "tool_use":
        return {
            "type": "tool_use",
            "id": block["id"],
            "name": block["name"],
            "input": dict(block.get("input") or {}),
        }
    return None  # thinking and server-tool blocks are not sent back (we enable neither)


@dataclass
class RuntimeStats:
    requests: int = 0
    retries: int = 0
    batches: int = 0
    waits_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SdkInternals:
    """What :class:`DirectPost` takes from the SDK beyond its public API, so that its errors are the
    SDK's own: the SDK's aiohttp exception map and the client's builders of a status error (from a
    response), a timeout error and a connection error (naming host and reason)."""

    map_aiohttp_exceptions: Callable[[], Any]
    status_error: Callable[[Any], Exception]
    timeout_error: Callable[[Any, Exception], Exception]
    connection_error: Callable[[Any, Exception], Exception]


def sdk_internals(client: Any) -> SdkInternals | None:
    """The one place this runtime reaches past the ``anthropic`` SDK's public API (for the direct path);
    ``None`` when the installed SDK no longer has one of them, or the client refreshes credentials or
    runs middleware of its own (then requests take the SDK's public path, ``client.post``).
    ``tests/test_runtime_anthropic_sdk.py`` fails when an SDK release moves any of them."""
    if getattr(client, "_custom_auth", None) is not None or getattr(client, "_middleware", None):
        return None
    if not (getattr(client, "api_key", None) or getattr(client, "auth_token", None)):
        return None
    try:
        import aiohttp  # noqa: F401
        import httpx2  # noqa: F401
        from anthropic._vendor.httpx_aiohttp.transport import map_aiohttp_exceptions
    except ImportError:
        return None
    builders = [getattr(client, name, None) for name in (
        "_make_status_error_from_response", "_make_timeout_error", "_make_connection_error")]
    if not all(callable(b) for b in builders):
        return None
    return SdkInternals(map_aiohttp_exceptions, *builders)  # type: ignore[arg-type]


class DirectPost:
    """``POST /v1/messages`` on one shared aiohttp session (keep-alive, ``connections`` in the pool),
    with the URL and headers the SDK ``client`` sends (auth, ``anthropic-version``, its user agent and
    platform headers, custom headers), read from it once.

    Errors are the SDK's, built by its own code (:func:`sdk_internals`): a 4xx/5xx from the response
    (so the status, body and ``retry-after`` / ``x-should-retry`` headers reach :func:`classify_error`
    as on the SDK's path); an aiohttp failure through the SDK's aiohttp exception map, raised as
    ``APITimeoutError`` / ``APIConnectionError`` as the SDK's request path does. The session is made on
    first use in the running event loop (a new loop gets a new one).
    """

    def __init__(self, client: Any, connections: int, timeout_s: float, internals: SdkInternals) -> None:
        import httpx2

        self._httpx = httpx2
        self._sdk = internals
        self.url = str(client.base_url).rstrip("/") + "/v1/messages"
        headers = {k.lower(): v for k, v in client.default_headers.items() if isinstance(v, str)}
        headers.update(
            {
                "content-type": "application/json",
                "x-stainless-retry-count": "0",  # our retries are not the SDK's
                "x-stainless-timeout": str(timeout_s),
                "x-stainless-read-timeout": str(timeout_s),
            }
        )
        self.headers = headers
        self.connections = max(1, connections)
        self.timeout_s = timeout_s
        self._request = httpx2.Request("POST", self.url)  # what the SDK's exceptions carry
        self._session: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _open(self) -> Any:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            tls = _ssl_context() if self.url.startswith("https:") else True
            connector = aiohttp.TCPConnector(limit=self.connections, ssl=tls)
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers=self.headers,  # the session's own: no per-request header merge
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=self.timeout_s, sock_read=self.timeout_s, connect=self.timeout_s
                ),
            )
            self._loop = loop
        return self._session

    async def post(self, body: bytes) -> bytes:
        """The response body of a 2xx; the SDK's exception otherwise."""
        session = self._open()
        httpx2 = self._httpx
        try:
            async with session.post(self.url, data=body) as resp:
                data: bytes = await resp.read()
                status, raw_headers = resp.status, resp.raw_headers
        except Exception as failure:
            try:  # the SDK's aiohttp exception map, entered only when a request failed
                with self._sdk.map_aiohttp_exceptions():
                    raise failure
            except httpx2.TimeoutException as exc:
                raise self._sdk.timeout_error(self._request, exc) from exc
            except Exception as exc:
                raise self._sdk.connection_error(self._request, exc) from exc
        if status >= 400:
            response = httpx2.Response(status, headers=raw_headers, content=data, request=self._request)
            raise self._sdk.status_error(response)
        return data

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is self._loop:
                await session.close()


_SAID: set[str] = set()
"""Endpoints whose missing Models API this process has already told of (one line, not one a runtime)."""


def _say_no_models_api(url: str, snapshot: str) -> None:
    if url not in _SAID:
        _SAID.add(url)
        log.warning(
            "%s has no Models API (/v1/models/{id} answers 404/405): model snapshot %r, as its Messages "
            "response reports it", url, snapshot,
        )


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The TLS context the SDK's aiohttp transport makes for itself (``httpx2.create_ssl_context()``:
    verification on, ``SSL_CERT_FILE`` honoured), made once per process: loading the certificates costs
    ~70 ms of CPU, and a study builds a runtime per batch."""
    import httpx2

    return httpx2.create_ssl_context()


def _http_backend(choice: str) -> str:
    """``aiohttp`` (when installed, for ``auto``) or ``httpx``: the SDK's HTTP transport."""
    if choice not in ("auto", "aiohttp", "httpx"):
        raise ConfigError(f"http must be auto, aiohttp or httpx (got {choice!r})")
    if choice == "httpx":
        return "httpx"
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        if choice == "aiohttp":
            raise ConfigError(
                "http='aiohttp' needs the aiohttp extra: pip install 'anthropic[aiohttp]'"
            ) from None
        return "httpx"
    return "aiohttp"


class _Batcher:
    """Gathers the requests of every probe in flight into one Message Batch per turn."""

    def __init__(self, run: Callable[[list[dict[str, Any]]], Awaitable[list[Any]]], window_s: float) -> None:
        self._run = run
        self.window_s = window_s
        self.active = 0
        self.pending: list[tuple[dict[str, Any], asyncio.Future[Any]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def enter(self) -> None:
        self.active += 1

    def leave(self) -> None:
        self.active -= 1
        self._arm()

    async def submit(self, params: dict[str, Any]) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending.append((params, fut))
        self._arm()
        return await fut

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self.pending:
            self._timer = asyncio.get_running_loop().call_later(self.window_s, self._check)

    def _check(self) -> None:
        self._timer = None
        if self.pending and len(self.pending) >= self.active:
            batch, self.pending = self.pending, []
            task = asyncio.get_running_loop().create_task(self._flush(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _flush(self, batch: list[tuple[dict[str, Any], asyncio.Future[Any]]]) -> None:
        try:
            results = await self._run([p for p, _ in batch])
        except BaseException as exc:
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc if isinstance(exc, Exception) else ProbeFailed(str(exc)))
            return
        for (_, fut), result in zip(batch, results, strict=True):
            if fut.done():
                continue
            if isinstance(result, BaseException):
                fut.set_exception(result)
            else:
                fut.set_result(result)


class AnthropicOptions(RuntimeOptions):
    """``runtime_options`` of the anthropic runtime (limits, retries and the timeout default to the
    settings of the same names; ``direct = false`` sends Messages requests through the SDK's request
    builder instead of :class:`DirectPost`)."""

    batch: bool = False
    concurrency: int | None = None
    requests_per_minute: int | None = None
    input_tokens_per_minute: int | None = None
    max_retries: int | None = None
    timeout_s: float | None = None
    max_tokens: int = 1024
    compliance_max_tokens: int = 8192
    system_prompt: str = SYSTEM_PROMPT
    base_url: str | None = None
    poll_initial_s: float = 2.0
    poll_max_s: float = 60.0
    batch_window_s: float = 0.05
    http: str = "auto"
    direct: bool = True
    tool_choice: Literal["auto", "any"] | None = None
    """``any``: forced-choice routing (the model must call ``Skill``); ``auto``/unset: free choice."""
    skill_enum: bool = False
    """List the skills' names as the ``skill`` argument's ``enum`` (a schema-constrained server can
    then name only a resident skill)."""


class AnthropicRuntime:
    name: ClassVar[str] = "anthropic"
    Options: ClassVar[type[RuntimeOptions]] = AnthropicOptions
    paid: ClassVar[bool] = True
    cached_listing: ClassVar[bool] = True
    batch_mode: ClassVar[bool] = True
    forced_choice: ClassVar[str] = "any"
    """The ``tool_choice`` option that forces a skill on every routing request."""
    wants_all_probes: bool = False

    def __init__(
        self,
        model: str | None = None,
        *,
        settings: Settings | None = None,
        batch: bool = False,
        concurrency: int | None = None,
        requests_per_minute: int | None = None,
        input_tokens_per_minute: int | None = None,
        max_retries: int | None = None,
        timeout_s: float | None = None,
        max_tokens: int = 1024,
        compliance_max_tokens: int = 8192,
        system_prompt: str = SYSTEM_PROMPT,
        base_url: str | None = None,
        api_key: str | None = None,
        retry_policy: RetryPolicy | None = None,
        poll_initial_s: float = 2.0,
        poll_max_s: float = 60.0,
        batch_window_s: float = 0.05,
        http: str = "auto",
        direct: bool = True,
        tool_choice: str | None = None,
        skill_enum: bool = False,
        client: Any = None,
    ) -> None:
        self.settings = settings or default_settings()
        self.skill_enum = skill_enum
        s = self.settings
        self.model = model or s.model or DEFAULT_MODEL
        if tool_choice not in (None, "auto", "any"):
            raise ConfigError(f"tool_choice must be auto or any (got {tool_choice!r})")
        self.tool_choice = tool_choice
        self.batch = batch
        self.wants_all_probes = batch
        self.max_tokens = max_tokens
        self.compliance_max_tokens = compliance_max_tokens
        self.system_prompt = system_prompt
        self.timeout_s = timeout_s or s.timeout_s
        self.policy = retry_policy or RetryPolicy(
            max_retries=s.max_retries if max_retries is None else max_retries
        )
        self._sem = asyncio.Semaphore(concurrency or s.concurrency)
        self._rpm = limiter(self.name, "requests", requests_per_minute or s.requests_per_minute)
        self._itpm = limiter(self.name, "input-tokens", input_tokens_per_minute or s.input_tokens_per_minute)
        self.poll_initial_s = poll_initial_s
        self.poll_max_s = poll_max_s
        self.stats = RuntimeStats()
        self._resolved: dict[str, str] = {}
        self._no_models_api = False
        """``/v1/models/{id}`` answered 404/405: snapshots come from Messages responses."""
        self._tools: dict[int, tuple[Catalog, dict[str, Any], dict[bool, tuple[Any, Any, bytes]]]] = {}
        self._prices: dict[str, Any] = {}  # model id -> its price (Settings.price_for, once a model)
        self._batcher = _Batcher(self._run_batch, batch_window_s) if batch else None
        self.http = "client"
        self._base_url_given = bool(base_url)
        if client is not None:
            self._clients: list[Any] = [client]
        else:
            kwargs: dict[str, Any] = {"max_retries": 0, "timeout": self.timeout_s}
            if base_url:
                kwargs["base_url"] = base_url
            if api_key:
                kwargs["api_key"] = api_key
            self.http = _http_backend(http)
            try:
                if self.http == "aiohttp":
                    # one aiohttp pool (the SDK's default limits) serves every request in flight
                    http_client = anthropic.DefaultAioHttpClient(verify=_ssl_context())
                    self._clients = [anthropic.AsyncAnthropic(**kwargs, http_client=http_client)]
                else:
                    # httpcore scans every pooled connection on each request; a few clients with
                    # CONNECTIONS_PER_CLIENT connections each keep that scan short at high concurrency
                    shards = max(1, math.ceil((concurrency or s.concurrency) / CONNECTIONS_PER_CLIENT))
                    self._clients = [anthropic.AsyncAnthropic(**kwargs) for _ in range(shards)]
            except anthropic.AnthropicError as exc:
                raise ConfigError(_NO_KEY) from exc
            first = self._clients[0]
            if not (first.api_key or first.auth_token or getattr(first, "_token_cache", None)):
                raise ConfigError(_NO_KEY)
        self.client = self._clients[0]
        self._messages_url = str(getattr(self.client, "base_url", "") or "").rstrip("/") + "/v1/messages"
        self._next_client = itertools.cycle(self._clients)
        self._direct: DirectPost | None = None
        wanted = direct and client is None and self.http == "aiohttp"
        internals = sdk_internals(self.client) if wanted else None
        if internals is not None:
            self._direct = DirectPost(self.client, concurrency or s.concurrency, self.timeout_s, internals)

    @property
    def request_path(self) -> str:
        """How Messages requests are sent: ``direct aiohttp`` or ``SDK (<transport>)``."""
        return "direct aiohttp" if self._direct is not None else f"SDK ({self.http})"

    # ---------------------------------------------------------------------------------- plumbing

    def _on_retry(self, attempt: int, err: TransientProbeError, wait: float) -> None:
        self.stats.retries += 1
        self.stats.waits_s += wait
        log.warning("retry %d after %.2fs: %s", attempt, wait, err.message)

    @property
    def endpoint(self) -> tuple[str, str]:
        """(the base URL requests go to, the setting that chose it) for error messages."""
        url = str(getattr(self.client, "base_url", "") or "").rstrip("/") or "the API"
        if self._base_url_given:
            return url, "runtime_options.base_url"
        if os.environ.get("ANTHROPIC_BASE_URL"):
            return url, "ANTHROPIC_BASE_URL"
        return url, "the SDK default (ANTHROPIC_BASE_URL unset)"

    @property
    def blind_hint(self) -> str:
        """What to check when the canary saw no activation (the endpoint named)."""
        own = self._base_url_given or bool(os.environ.get("ANTHROPIC_BASE_URL"))
        return blind_hint(*self.endpoint, default=not own)

    def _classify(self, exc: BaseException) -> ProbeFailed | None:
        err = classify_error(exc)
        return endpoint_error(err, exc, *self.endpoint) if err is not None else None

    async def _retrying(self, call: Callable[[], Awaitable[Any]]) -> Any:
        return await retrying(call, policy=self.policy, classify=self._classify, on_retry=self._on_retry)

    async def _create_once(self, params: dict[str, Any], body: bytes) -> dict[str, Any]:
        """One request (``body`` is ``params`` as JSON); the message as the API's JSON (raw bytes: no
        model objects to build per request, which is most of the client's CPU at high concurrency)."""
        async with self._sem:
            await self._rpm.acquire(1)
            if self._itpm.rate is not None:
                await self._itpm.acquire(estimate_request_tokens(params))
            self.stats.requests += 1
            if self._direct is not None:
                exchange = self._direct.post(body)
            else:
                exchange = next(self._next_client).post(
                    "/v1/messages",
                    content=body,
                    cast_to=bytes,
                    options={"headers": {"content-type": "application/json"}, "timeout": self.timeout_s},
                )
            # timeout_s bounds the whole exchange, not each read: a reply dripped a byte at a time ends
            raw = await within_deadline(self.timeout_s, exchange, self._messages_url)
        try:
            message: dict[str, Any] = orjson.loads(raw)
        except ValueError as exc:
            raise TransientProbeError("the API answered with a body that is not JSON") from exc
        return message

    async def _create(self, params: dict[str, Any], prefix: bytes) -> Any:
        if self._batcher is not None:
            batcher = self._batcher
            return await self._retrying(lambda: batcher.submit(params))
        body = b"".join(
            (
                prefix,
                b',"model":',
                orjson.dumps(params["model"]),
                b',"max_tokens":',
                str(int(params["max_tokens"])).encode(),
                b',"messages":',
                orjson.dumps(params["messages"]),
                b',"tool_choice":' + orjson.dumps(params["tool_choice"]) if "tool_choice" in params else b"",
                b"}",
            )
        )
        return await self._retrying(lambda: self._create_once(params, body))

    async def _run_batch(self, requests: list[dict[str, Any]]) -> list[Any]:
        """One Message Batch: create, poll with backoff, read the results in request order."""
        self.stats.batches += 1
        body = [{"custom_id": f"r{i}", "params": p} for i, p in enumerate(requests)]
        batches = self.client.messages.batches
        created = await self._retrying(lambda: batches.create(requests=body))
        batch_id = created.id
        status = created.processing_status
        delay = self.poll_initial_s
        while status != "ended":
            await asyncio.sleep(delay)
            delay = min(self.poll_max_s, delay * 2)
            status = (await self._retrying(lambda: batches.retrieve(batch_id))).processing_status
        decoder = await self._retrying(lambda: batches.results(batch_id))
        by_id: dict[str, Any] = {}
        async for item in decoder:
            by_id[item.custom_id] = item.result
        out: list[Any] = []
        for i in range(len(requests)):
            result = by_id.get(f"r{i}")
            if result is None:
                out.append(TransientProbeError(f"batch {batch_id}: no result for request r{i}"))
            elif result.type == "succeeded":
                out.append(result.message.model_dump(mode="json"))
            elif result.type == "errored":
                err = result.error.error
                kind, message = str(getattr(err, "type", "error")), str(getattr(err, "message", ""))
                text = f"batch {batch_id}: {kind}: {message}"
                transient = kind in ("overloaded_error", "api_error", "rate_limit_error", "timeout_error")
                out.append(TransientProbeError(text) if transient else ProbeFailed(text))
            else:  # canceled, expired
                out.append(TransientProbeError(f"batch {batch_id}: request {result.type}"))
        return out

    async def resolve_model(self, model: str | None = None) -> str:
        """The dated snapshot behind ``model`` (an alias), from ``/v1/models/{id}``; on a server without
        the Models API (404/405 there), the ``model`` of one small Messages request's response."""
        return await self._resolve(model or self.model, None)

    async def _resolve(self, model: str, reported: str | None) -> str:
        """:meth:`resolve_model`; ``reported`` (a response's ``model``) stands in for the small request."""
        if model in self._resolved:
            return self._resolved[model]
        try:
            info = None if self._no_models_api else await self._retrying(lambda: self._model_info(model))
            if info is not None:
                resolved = str(info.id)
            elif reported:
                resolved = reported
            else:
                resolved = await self._retrying(lambda: self._model_from_messages(model))
        except ProbeFailed as exc:
            if exc.message.startswith("cannot reach") or "(set by " in exc.message:
                raise ConfigError(exc.message) from exc  # the endpoint is wrong, not the model
            raise ConfigError(f"model {model!r}: {exc.message}; check --model") from exc
        if info is None:
            _say_no_models_api(self.endpoint[0], resolved)
        self._resolved[model] = resolved
        return resolved

    async def _model_info(self, model: str) -> Any:
        """``GET /v1/models/{id}``; ``None`` when the server has no Models API (404 or 405: told apart
        from a wrong model by the Messages request that follows)."""
        try:
            url = str(self.client.base_url).rstrip("/") + f"/v1/models/{model}"
            return await within_deadline(self.timeout_s, self.client.models.retrieve(model), url)
        except anthropic.APIStatusError as exc:
            if exc.status_code not in (404, 405):
                raise
            self._no_models_api = True
            return None

    async def _model_from_messages(self, model: str) -> str:
        """The ``model`` a one-token Messages request reports (a server without the Models API)."""
        params = {
            "model": model,
            "max_tokens": 1,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        }
        message = await self._create_once(params, orjson.dumps(params))
        return str(message.get("model") or model)

    async def _snapshot(self, requested: str, reported: str | None) -> str | None:
        if reported and reported != requested:
            self._resolved.setdefault(requested, reported)
            return reported
        try:
            return await self._resolve(requested, reported)
        except ConfigError:
            return reported

    def _params(
        self,
        model: str,
        catalog: Catalog,
        messages: list[dict[str, Any]],
        with_tools: bool,
        options: ProbeOptions | None = None,
    ) -> tuple[dict[str, Any], bytes]:
        """The request's parameters, and its stable part as JSON (``{"system":…,"tools":…`` without the
        closing brace), serialised once per catalog object and tool set."""
        cached = self._tools.get(id(catalog))
        if cached is None or cached[0] is not catalog:  # the listing is built once per catalog object
            cached = self._tools[id(catalog)] = (catalog, skill_tool(catalog, names_enum=self.skill_enum), {})
        listing, prefixes = cached[1], cached[2]
        stable = prefixes.get(with_tools)
        if stable is None:  # the tools, the system prompt and their JSON: once per catalog and tool set
            tools: list[dict[str, Any]] = [{**listing, "cache_control": CACHE}]
            if with_tools:
                tools = [listing, *TOOL_SCHEMAS[:-1], {**TOOL_SCHEMAS[-1], "cache_control": CACHE}]
            system = [{"type": "text", "text": self.system_prompt, "cache_control": CACHE}]
            stable = prefixes[with_tools] = (
                tools, system, orjson.dumps({"system": system, "tools": tools})[:-1]
            )
        tools, system, prefix = stable
        sent = list(messages)
        if len(sent) > 1:  # cache the conversation so far for the next turn
            last = sent[-1]
            blocks = list(last["content"])
            blocks[-1] = {**blocks[-1], "cache_control": CACHE}
            sent[-1] = {**last, "content": blocks}
        budget = self.compliance_max_tokens if with_tools else reply_budget(options, self.max_tokens)
        params: dict[str, Any] = {
            "model": model,
            "max_tokens": budget,
            "system": system,
            "tools": tools,
            "messages": sent,
        }
        if self.tool_choice is not None and not with_tools:
            params["tool_choice"] = {"type": self.tool_choice}
        return params, prefix

    # ------------------------------------------------------------------------------------ probing

    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        if self._batcher is not None:
            self._batcher.enter()
        try:
            return await self._probe(query, catalog, tracker)
        finally:
            if self._batcher is not None:
                self._batcher.leave()

    async def _probe(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        opts = tracker.options
        model = opts.model or self.model
        messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": query.text}]}]
        dialogue = SkillDialogue(query, catalog, tracker)
        usage: Usage | None = None
        reported: str | None = None
        error: str | None = None
        try:
            while True:
                resp = await self._create(*self._params(model, catalog, messages, dialogue.compliance, opts))
                usage = usage_of(resp) if usage is None else usage + usage_of(resp)
                reported = str(resp["model"]) if resp.get("model") else reported
                content = [
                    b for b in (_block_to_param(x) for x in resp.get("content") or []) if b is not None
                ]
                dialogue.reply("\n".join(b["text"] for b in content if b["type"] == "text").strip())
                calls = [b for b in content if b["type"] == "tool_use"]
                if not calls:
                    break
                results: list[dict[str, Any]] = []
                for call in calls:
                    answer = dialogue.answer(call["name"], call["input"])
                    result = {"type": "tool_result", "tool_use_id": call["id"], "content": answer.content}
                    results.append({**result, "is_error": True} if answer.is_error else result)
                    if dialogue.stop:
                        break
                if dialogue.finished:
                    break
                messages.append({"role": "assistant", "content": content})
                messages.append({"role": "user", "content": results})
        except ProbeFailed as exc:
            error = exc.message
            self.stats.errors[error] = self.stats.errors.get(error, 0) + 1
        resolved = await self._snapshot(model, reported) if reported else self._resolved.get(model)
        priced = resolved or model
        if priced not in self._prices:
            self._prices[priced] = self.settings.price_for(priced)
        price = self._prices[priced]
        usage = usage if usage is not None else Usage()
        return Outcome.from_tracker(
            tracker,
            turns=dialogue.requests,
            error=error,
            usage=usage,
            cost_usd=cost_of(usage, price, batch=self.batch),
            resolved_model=resolved,
            tool_calls=dialogue.tool_calls,
            final_text=dialogue.final_text,
        )

    async def version(self) -> str | None:
        return package_version("anthropic")

    async def aclose(self) -> None:
        if self._direct is not None:
            await self._direct.aclose()
        for client in self._clients:
            await client.close()
