"""``openai-compatible``: any Chat Completions endpoint (vLLM, Ollama, llama.cpp server, LM Studio, hosted
APIs) through the official ``openai`` SDK.

Like the ``anthropic`` runtime, the model is offered exactly one function tool, ``Skill``, input
``{"skill": "<name>"}``, whose description lists every resident skill's name and description; no request
carries a skill body before the model invoked that skill (progressive disclosure). Invoking a resident
skill answers the call with a ``tool`` message carrying its body; a name that is not resident gets an
error result naming the resident skills and is not recorded. Every invocation goes to the shared
:class:`~runtimes.base.Tracker`; the probe ends at the target (early exit), at ``max_turns``
invocations, or when the model answers without calling ``Skill``.

Endpoint and key: ``base_url`` option, else ``OPENAI_BASE_URL``, else the SDK default; ``api_key``
option, else ``OPENAI_API_KEY``, else a placeholder (local servers need none). The key is never
logged. Transient failures (429, 5xx, timeouts, dropped connections) are retried with exponential
backoff and jitter honouring ``retry-after``; the SDK's own retries are off so the count is ours.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from typing import Any, ClassVar

from runtimes.base import Outcome, ProbeOptions, Tracker
from skillreach.errors import ConfigError, TransientProbeError
from skillreach.models import Catalog, Query, Skill, ToolCall, Usage

__all__ = ["OpenAICompatRuntime", "skill_tool", "system_prompt"]

NO_KEY_PLACEHOLDER = "not-needed"  # local servers ignore the key; the SDK insists on a value
_MAX_BACKOFF_S = 60.0
_KEYLIKE = re.compile(r"\b(sk|key|Bearer)[-_ ][A-Za-z0-9*_\-]{6,}")


def system_prompt() -> str:
    return (
        "You are a helpful coding agent. Skills extend what you can do: when one of the skills listed "
        "in the Skill tool matches the user's request, call the Skill tool with its name before doing "
        "anything else, then follow the instructions it returns. If no skill fits, answer directly."
    )


def skill_tool(catalog: Catalog) -> dict[str, Any]:
    """The single ``Skill`` function tool: names and descriptions only, never a body."""
    listing = "\n".join(f"- {s.name}: {s.description}" for s in catalog.skills)
    description = (
        "Execute a skill within the main conversation. When the user asks for something a skill "
        "below covers, invoke it by name; the tool returns the skill's full instructions.\n\n"
        f"<available_skills>\n{listing}\n</available_skills>"
    )
    return {
        "type": "function",
        "function": {
            "name": "Skill",
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"skill": {"type": "string", "description": "The skill name."}},
                "required": ["skill"],
                "additionalProperties": False,
            },
        },
    }


def _skill_result(skill: Skill) -> str:
    base = f"Base directory for this skill: {skill.folder}\n\n" if skill.folder else ""
    return f"{base}{skill.body}"


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


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for key in ("retry-after-ms", "retry-after"):
        value = headers.get(key)
        if value is None:
            continue
        try:
            seconds = float(value)
        except ValueError:
            continue
        return seconds / 1000 if key == "retry-after-ms" else seconds
    return None


class OpenAICompatRuntime:
    """One Chat Completions client shared by every probe of a study."""

    name: ClassVar[str] = "openai-compatible"

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        options: ProbeOptions | None = None,
        max_retries: int = 6,
        timeout_s: float | None = None,
        backoff_s: float = 1.0,
        max_tokens: int = 1024,
        temperature: float | None = None,
        **_ignored: Any,
    ) -> None:
        self.options = options or ProbeOptions()
        self.model = model or self.options.model or os.environ.get("OPENAI_MODEL")
        if not self.model:
            raise ConfigError(
                "the openai-compatible runtime needs a model; pass --model NAME (the id your endpoint serves)"
            )
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or NO_KEY_PLACEHOLDER
        self.max_retries = max_retries
        self.timeout_s = timeout_s if timeout_s is not None else self.options.timeout_s
        self.backoff_s = backoff_s
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._client: Any = None

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAICompatRuntime(model={self.model!r}, base_url={self.base_url!r})"

    def _get_client(self) -> Any:
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self.base_url,
                max_retries=0,  # ours, below, honour retry-after and count every attempt
                timeout=self.timeout_s,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    # --------------------------------------------------------------------------------- requests
    async def _create(self, request: dict[str, Any]) -> Any:
        """One completion with retries on transient failures; other API errors raise at once."""
        import openai

        client = self._get_client()
        attempt = 0
        while True:
            try:
                return await client.chat.completions.create(**request)
            except (
                openai.APITimeoutError,
                openai.APIConnectionError,
                openai.RateLimitError,
                openai.InternalServerError,
            ) as exc:
                transient: Exception = exc
            except openai.APIStatusError as exc:
                if exc.status_code in (408, 409) or exc.status_code >= 500:
                    transient = exc
                else:
                    raise
            attempt += 1
            wait = _retry_after(transient)
            if attempt > self.max_retries:
                raise TransientProbeError(
                    f"{_describe(transient)} (gave up after {self.max_retries} retries)", retry_after=wait
                ) from transient
            if wait is None:
                wait = min(self.backoff_s * 2 ** (attempt - 1), _MAX_BACKOFF_S) * (0.5 + random.random() / 2)
            await asyncio.sleep(min(wait, _MAX_BACKOFF_S))

    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt()},
            {"role": "user", "content": query.text},
        ]
        tools = [skill_tool(catalog)]
        usage = Usage()
        resolved: str | None = None
        final_text: str | None = None
        tool_calls: list[ToolCall] = []
        # Unknown names are not invocations, so bound the conversation by requests as well.
        max_requests = tracker.max_turns + 3
        requests = 0
        try:
            while not tracker.done and requests < max_requests:
                request: dict[str, Any] = {
                    "model": self.model,
                    "messages": messages,
                    "tools": tools,
                    "max_tokens": self.max_tokens,
                }
                if self.temperature is not None:
                    request["temperature"] = self.temperature
                response = await self._create(request)
                requests += 1
                usage = usage + _usage(getattr(response, "usage", None))
                resolved = getattr(response, "model", None) or resolved
                if not response.choices:
                    break
                message = response.choices[0].message
                final_text = message.content or final_text
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
                    result = self._answer(call, catalog, tracker, tool_calls)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        except TransientProbeError as exc:
            return self._outcome(
                tracker, usage, resolved, tool_calls, final_text, error=self._scrub(exc.message)
            )
        except Exception as exc:  # vendor errors become data on the probe, never a crashed run
            return self._outcome(
                tracker, usage, resolved, tool_calls, final_text, error=self._scrub(_describe(exc))
            )
        return self._outcome(tracker, usage, resolved, tool_calls, final_text)

    def _scrub(self, text: str) -> str:
        """Error text as recorded: the key (or any ``sk-…`` token) never reaches a probe record."""
        if self._api_key and self._api_key != NO_KEY_PLACEHOLDER:
            text = text.replace(self._api_key, "***")
        return _KEYLIKE.sub("***", text)

    def _answer(self, call: Any, catalog: Catalog, tracker: Tracker, tool_calls: list[ToolCall]) -> str:
        """The tool result for one call; a resident skill is reported to the tracker."""
        name = call.function.name
        try:
            args = json.loads(call.function.arguments or "{}")
        except ValueError:
            args = {}
        if not isinstance(args, dict):
            args = {}
        if name != "Skill":
            tool_calls.append(ToolCall(tool=name, input=args))
            return f"Error: no tool named {name!r}; the only tool is Skill."
        if tracker.done:
            return "Stopped."
        skill_name = str(args.get("skill", "")).strip()
        skill = catalog.get(skill_name)
        if skill is None:
            return f"Error: unknown skill {skill_name!r}. Available skills: {', '.join(catalog.names)}"
        tracker.invoke(skill.name)
        return _skill_result(skill)

    def _outcome(
        self,
        tracker: Tracker,
        usage: Usage,
        resolved: str | None,
        tool_calls: list[ToolCall],
        final_text: str | None,
        *,
        error: str | None = None,
    ) -> Outcome:
        return Outcome.from_tracker(
            tracker,
            turns=tracker.turns_used,
            usage=usage,
            resolved_model=resolved,
            error=error,
            tool_calls=tool_calls,
            final_text=final_text,
        )


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    message = str(getattr(exc, "message", None) or exc).splitlines()[0][:300]
    return f"{kind} {status}: {message}" if status else f"{kind}: {message}"
