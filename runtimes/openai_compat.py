"""``openai-compatible``: any Chat Completions endpoint (vLLM, Ollama, llama.cpp server, LM Studio, hosted
APIs) through the official ``openai`` SDK, offering one ``Skill`` tool exactly like ``anthropic``.

The model is offered exactly one function tool, ``Skill`` (``{"skill": "<name>"}``), with the same
description and system prompt as the ``anthropic`` runtime: every resident skill's name and
description, never a body before the model invoked that skill (progressive disclosure). Invoking a
resident skill answers the call with a ``tool`` message carrying its body; an unknown name gets an
error result listing the resident skills and is not recorded. Every invocation goes to the shared
:class:`~skillreach.study.contract.Tracker`; the probe ends at the target (early exit), at ``max_turns``
invocations, or when the model answers without calling ``Skill``.

- **Endpoint and key**: ``base_url`` option, else ``OPENAI_BASE_URL``, else the SDK default; ``api_key``
  option, else ``OPENAI_API_KEY``, else a placeholder (local servers need none). The key never reaches
  a log, an error text or a record.
- **Retries**: the SDK's own are off; :mod:`runtimes._retry` retries 429, 5xx, 408/409, timeouts and
  dropped connections with exponential backoff and jitter, honouring ``retry-after``/``retry-after-ms``
  (and ``x-should-retry``), at most ``max_retries`` times; other 4xx fail the probe at once.
- **Limits**: a semaphore bounds requests in flight; a token bucket bounds requests per minute.
- **Usage**: ``prompt_tokens`` (cached tokens from ``prompt_tokens_details`` counted as cache reads) and
  ``completion_tokens`` summed over the probe; the model snapshot is the response's ``model``; the
  cost comes from ``Settings.price_for`` when the model is priced.
- **Model snapshot before a run** (:meth:`OpenAICompatRuntime.resolve_model`, for the fingerprint): the
  model's id when ``GET /models`` lists it; otherwise — no Models API (404/405), or a server that
  serves the model under another name (llama.cpp, Ollama tags) — the ``model`` that one small
  completion (``max_tokens`` 1) reports, said in one line; a wrong model fails that request.
- **A reply budget for a decision**: routing requests ask for at most ``routing_max_tokens``
  (default 256); compliance mode and ``keep_answer`` keep ``max_tokens``.
- **Forced choice** (``tool_choice="required"``): routing requests must call a tool, so the model
  loads some skill; abstention is then not measured (the reports say so).
- **Compliance mode** (``ProbeOptions.compliance``): once the expected skill is loaded the conversation
  goes on with Bash, Read, Write and Edit offered (:mod:`runtimes._toolenv`), recorded and answered
  from ``query.checks.tool_results``, never executed, up to ``step_budget`` requests; the last text after
  the skill loaded is ``final_text`` (``""`` when the agent ended with none).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from typing import Any, ClassVar, Literal

from skillreach.errors import ConfigError, ProbeFailed, TransientProbeError
from skillreach.models import Catalog, Query, Usage
from skillreach.runtimes._ratelimit import limiter
from skillreach.runtimes._retry import RetryPolicy, retrying
from skillreach.runtimes._skilltool import (
    SYSTEM_PROMPT,
    SkillDialogue,
    blind_hint,
    classify_sdk_error,
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

__all__ = ["OpenAICompatOptions", "OpenAICompatRuntime", "as_function", "classify_error"]

log = logging.getLogger(__name__)
NO_KEY_PLACEHOLDER = "not-needed"  # local servers ignore the key; the SDK insists on a value
_SAID: set[tuple[str, str]] = set()
"""(endpoint, model) pairs whose snapshot source this process has told of."""
_KEYLIKE = re.compile(r"\b(sk|key|Bearer)[-_ ][A-Za-z0-9*_\-]{6,}")


def as_function(tool: dict[str, Any]) -> dict[str, Any]:
    """A Messages-API tool definition as a Chat Completions function tool."""
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool["description"],
            "parameters": tool["input_schema"],
        },
    }


def _describe(status: int, kind: str, message: str) -> str:
    first = message.splitlines()[0][:300] if message.strip() else kind
    return f"HTTP {status}: {first}"


def classify_error(exc: BaseException) -> ProbeFailed | None:
    """Translate an ``openai`` exception: transient (retry) or final; ``None`` when it is not the SDK's."""
    import openai

    return classify_sdk_error(exc, openai, _describe)


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    prompt = int(getattr(raw, "prompt_tokens", 0) or 0)
    details = getattr(raw, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=int(getattr(raw, "completion_tokens", 0) or 0),
        cache_read_input_tokens=cached,
    )


class OpenAICompatOptions(RuntimeOptions):
    """``runtime_options`` of the openai-compatible runtime."""

    base_url: str | None = None
    max_retries: int | None = None
    """Retries of transient errors (default: the ``max_retries`` setting)."""
    timeout_s: float | None = None
    concurrency: int | None = None
    requests_per_minute: int | None = None
    max_tokens: int = 1024
    temperature: float | None = None
    system_prompt: str = SYSTEM_PROMPT
    backoff_s: float | None = None
    tool_choice: Literal["auto", "required"] | None = None
    """``required``: forced-choice routing (the model must call ``Skill``); ``auto``/unset: free."""
    skill_enum: bool = False
    """List the skills' names as the ``skill`` argument's ``enum`` (a schema-constrained server such as
    llama.cpp can then name only a resident skill)."""


class OpenAICompatRuntime:
    """One Chat Completions client shared by every probe of a study."""

    name: ClassVar[str] = "openai-compatible"
    Options: ClassVar[type[RuntimeOptions]] = OpenAICompatOptions
    paid: ClassVar[bool] = True
    cached_listing: ClassVar[bool] = False
    batch_mode: ClassVar[bool] = False
    forced_choice: ClassVar[str] = "required"
    """The ``tool_choice`` option that forces a skill on every routing request."""
    wants_all_probes: bool = False

    def __init__(
        self,
        model: str | None = None,
        *,
        settings: Settings | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int | None = None,
        timeout_s: float | None = None,
        concurrency: int | None = None,
        requests_per_minute: int | None = None,
        max_tokens: int = 1024,
        temperature: float | None = None,
        system_prompt: str = SYSTEM_PROMPT,
        retry_policy: RetryPolicy | None = None,
        backoff_s: float | None = None,
        tool_choice: str | None = None,
        skill_enum: bool = False,
        client: Any = None,
    ) -> None:
        self.skill_enum = skill_enum
        self.settings = settings or default_settings()
        s = self.settings
        chosen = model or s.model or os.environ.get("OPENAI_MODEL")
        if not chosen:
            raise ConfigError(
                "the openai-compatible runtime needs a model; pass --model NAME (the id your endpoint serves)"
            )
        self.model: str = chosen
        if tool_choice not in (None, "auto", "required"):
            raise ConfigError(f"tool_choice must be auto or required (got {tool_choice!r})")
        self.tool_choice = tool_choice
        self._resolved: dict[str, str] = {}
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._base_url_given = bool(base_url)
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or NO_KEY_PLACEHOLDER
        self.timeout_s = timeout_s or s.timeout_s
        self.policy = retry_policy or RetryPolicy(
            max_retries=s.max_retries if max_retries is None else max_retries,
            **({"base_s": backoff_s} if backoff_s is not None else {}),
        )
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.system_prompt = system_prompt
        self._sem = asyncio.Semaphore(concurrency or s.concurrency)
        self._rpm = limiter(self.name, "requests", requests_per_minute or s.requests_per_minute)
        self.retries = 0
        self._client: Any = client

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAICompatRuntime(model={self.model!r}, base_url={self.base_url!r})"

    def _get_client(self) -> Any:
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self.base_url, max_retries=0, timeout=self.timeout_s
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def version(self) -> str | None:
        return package_version("openai")

    # --------------------------------------------------------------------------------- requests
    def _on_retry(self, attempt: int, err: TransientProbeError, wait: float) -> None:
        self.retries += 1
        log.warning("retry %d after %.2fs: %s", attempt, wait, self._scrub(err.message))

    async def _create_once(self, request: dict[str, Any]) -> Any:
        async with self._sem:
            await self._rpm.acquire(1)
            client = self._get_client()
            # timeout_s bounds the whole exchange, not each read: a reply dripped a byte at a time ends
            try:
                async with asyncio.timeout(self.timeout_s):
                    return await client.chat.completions.create(**request)
            except TimeoutError as exc:
                import httpx2
                import openai

                url = str(client.base_url).rstrip("/") + "/chat/completions"
                raise openai.APITimeoutError(request=httpx2.Request("POST", url)) from exc

    @property
    def endpoint(self) -> tuple[str, str]:
        """(the base URL requests go to, the setting that chose it) for error messages."""
        if self._base_url_given:
            return str(self.base_url), "runtime_options.base_url"
        if self.base_url:
            return self.base_url, "OPENAI_BASE_URL"
        return "https://api.openai.com/v1", "the SDK default (OPENAI_BASE_URL unset)"

    @property
    def blind_hint(self) -> str:
        """What to check when the canary saw no activation (the endpoint named)."""
        return blind_hint(*self.endpoint, default=self.base_url is None)

    def _classify(self, exc: BaseException) -> ProbeFailed | None:
        err = classify_error(exc)
        return endpoint_error(err, exc, *self.endpoint) if err is not None else None

    async def _create(self, request: dict[str, Any]) -> Any:
        return await self._retrying(lambda: self._create_once(request))

    async def resolve_model(self, model: str | None = None) -> str:
        """The model's id when ``GET /models`` lists it, else the ``model`` one small completion reports
        (a server without the Models API, or one that names its model otherwise)."""
        model = model or self.model
        if model in self._resolved:
            return self._resolved[model]
        try:
            listed = await self._retrying(self._listed_models)
            if listed is not None and model in listed:
                resolved = model
            else:
                resolved = await self._retrying(lambda: self._model_from_completion(model, listed))
        except ProbeFailed as exc:
            text = self._scrub(exc.message)
            if text.startswith("cannot reach") or "(set by " in text:
                raise ConfigError(text) from exc  # the endpoint is wrong, not the model
            raise ConfigError(f"model {model!r}: {text}; check --model") from exc
        self._resolved[model] = resolved
        return resolved

    async def _retrying(self, call: Any) -> Any:
        return await retrying(call, policy=self.policy, classify=self._classify, on_retry=self._on_retry)

    async def _listed_models(self) -> list[str] | None:
        """The ids ``GET /models`` lists; ``None`` when the server has none (404/405)."""
        import openai

        try:
            async with self._sem:
                page = await self._get_client().models.list()
        except openai.APIStatusError as exc:
            if exc.status_code in (404, 405):
                return None
            raise
        return [str(m.id) for m in getattr(page, "data", None) or []]

    async def _model_from_completion(self, model: str, listed: list[str] | None) -> str:
        """The ``model`` a one-token completion reports, said in one line."""
        response = await self._create_once(
            {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
        )
        reported = str(getattr(response, "model", None) or model)
        url, _ = self.endpoint
        if (url, model) not in _SAID:  # one line a process, not one a runtime (the study builds several)
            _SAID.add((url, model))
            why = f"does not list {model!r}" if listed is not None else "has no Models API (/models: 404/405)"
            log.warning("%s %s: model snapshot %r, as its first response reports it", url, why, reported)
        return reported

    def _request(
        self,
        model: str,
        catalog: Catalog,
        messages: list[dict[str, Any]],
        compliance: bool,
        options: ProbeOptions | None = None,
    ) -> dict[str, Any]:
        tools = [as_function(skill_tool(catalog, names_enum=self.skill_enum))]
        if compliance:
            tools += [as_function(t) for t in TOOL_SCHEMAS]
        request: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "system", "content": self.system_prompt}, *messages],
            "tools": tools,
            "max_tokens": self.max_tokens if compliance else reply_budget(options, self.max_tokens),
        }
        if self.tool_choice is not None and not compliance:
            request["tool_choice"] = self.tool_choice
        if self.temperature is not None:
            request["temperature"] = self.temperature
        return request

    # ----------------------------------------------------------------------------------- probe
    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        model = tracker.options.model or self.model
        messages: list[dict[str, Any]] = [{"role": "user", "content": query.text}]
        dialogue = SkillDialogue(query, catalog, tracker)
        usage = Usage()
        resolved: str | None = None
        error: str | None = None
        try:
            while True:
                response = await self._create(
                    self._request(model, catalog, messages, dialogue.compliance, tracker.options)
                )
                usage = usage + _usage(getattr(response, "usage", None))
                resolved = getattr(response, "model", None) or resolved
                if not response.choices:
                    dialogue.reply(None)
                    break
                message = response.choices[0].message
                dialogue.reply(message.content)
                calls = list(message.tool_calls or [])
                if not calls:
                    break
                messages.append(
                    {
                        "role": "assistant",
                        "content": message.content,
                        "tool_calls": [
                            {
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.function.name, "arguments": c.function.arguments},
                            }
                            for c in calls
                        ],
                    }
                )
                for call in calls:
                    answer = dialogue.answer(call.function.name, _arguments(call.function.arguments))
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": answer.content})
                    if dialogue.stop:
                        break
                if dialogue.finished:
                    break
        except ProbeFailed as exc:
            error = self._scrub(exc.message)
        except Exception as exc:  # anything else from the SDK is data on the probe, never a crashed run
            error = self._scrub(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return Outcome.from_tracker(
            tracker,
            turns=dialogue.requests,
            error=error,
            usage=usage,
            cost_usd=cost_of(usage, self.settings.price_for(resolved or model)),
            resolved_model=resolved,
            tool_calls=dialogue.tool_calls,
            final_text=dialogue.final_text,
        )

    def _scrub(self, text: str) -> str:
        """Error text as recorded: the key (or any key-looking token) never reaches a probe record."""
        if self._api_key and self._api_key != NO_KEY_PLACEHOLDER:
            text = text.replace(self._api_key, "***")
        return _KEYLIKE.sub("***", text)


def _arguments(raw: str | None) -> dict[str, Any]:
    """A function call's arguments (a JSON string); anything but an object is no arguments."""
    try:
        args = json.loads(raw or "{}")
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}
