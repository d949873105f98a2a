"""Runtimes by name. Heavy SDKs are imported only when their runtime is asked for.

Each runtime class declares its ``runtime_options`` as one pydantic model (``Options``, a
:class:`~skillreach.study.contract.RuntimeOptions`) and its capabilities as class attributes (``paid``,
``cached_listing``, ``batch_mode``, ``wants_all_probes``); :func:`get_runtime` checks the options
against that model before building the runtime, so a misspelt option is a ``ConfigError`` naming the
valid ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillreach.runtimes._anthropic_common import api_message, translate_error, usage_of
from skillreach.runtimes._ratelimit import SharedRateLimit, set_shared_limits
from skillreach.runtimes._registry import build_named, class_named
from skillreach.runtimes._retry import RetryTally, watch_retries
from skillreach.settings import Settings
from skillreach.study.contract import (
    Outcome,
    ProbeOptions,
    Runtime,
    RuntimeOptions,
    Tracker,
    check_options,
)

if TYPE_CHECKING:
    from skillreach.study.judge import Judge

__all__ = [
    "JUDGES",
    "REGISTRY",
    "Outcome",
    "ProbeOptions",
    "RetryTally",
    "Runtime",
    "RuntimeOptions",
    "SharedRateLimit",
    "Tracker",
    "api_message",
    "capability",
    "check_runtime_options",
    "forced_choice_note",
    "get_judge",
    "get_runtime",
    "known_runtimes",
    "reports_usage",
    "request_tokens",
    "runtime_class",
    "set_shared_limits",
    "translate_error",
    "usage_of",
    "watch_retries",
]

# name -> "module:Class"; a plain dict, no plugin magic.
REGISTRY: dict[str, str] = {
    "fake": "skillreach.runtimes.fake:FakeRuntime",
    "keyword": "skillreach.runtimes.keyword:KeywordRuntime",
    "retriever": "skillreach.runtimes.retriever:RetrieverRuntime",
    "anthropic": "skillreach.runtimes.anthropic:AnthropicRuntime",
    "claude-code": "skillreach.runtimes.claude_code:ClaudeCodeRuntime",
    "openai-compatible": "skillreach.runtimes.openai_compat:OpenAICompatRuntime",
    "pi": "skillreach.runtimes.pi:PiRuntime",
    "codex": "skillreach.runtimes.codex:CodexRuntime",
    "gemini-cli": "skillreach.runtimes.gemini_cli:GeminiCliRuntime",
    "opencode": "skillreach.runtimes.opencode:OpenCodeRuntime",
    "copilot": "skillreach.runtimes.copilot:CopilotRuntime",
    "goose": "skillreach.runtimes.goose:GooseRuntime",
    "antigravity-cli": "skillreach.runtimes.antigravity_cli:AntigravityCliRuntime",
    "antigravity-sdk": "skillreach.runtimes.antigravity_sdk:AntigravitySdkRuntime",
}


def known_runtimes() -> list[str]:
    return sorted(REGISTRY)


def runtime_class(name: str) -> type[Runtime]:
    """The class of the runtime called ``name`` (its capabilities without building it)."""
    cls: type[Runtime] = class_named(REGISTRY, name, "runtime")
    return cls


def check_runtime_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` checked against the runtime's ``Options`` model (:func:`check_options`)."""
    model: type[RuntimeOptions] = getattr(runtime_class(name), "Options", RuntimeOptions)
    return check_options(name, model, options)


def get_runtime(
    name: str, *, settings: Settings | None = None, model: str | None = None, **options: Any
) -> Runtime:
    """Build the runtime called ``name``: its ``runtime_options`` checked, the study's settings and model
    passed in; an unknown name lists the known ones."""
    checked = check_runtime_options(name, options)
    runtime: Runtime = runtime_class(name)(model=model, settings=settings, **checked)  # type: ignore[call-arg]
    return runtime


def capability(name: str, what: str) -> bool:
    """A runtime's capability (``paid``, ``cached_listing``, ``batch_mode``), read off its class."""
    return bool(getattr(class_named(REGISTRY, name, "runtime"), what, False))


def request_tokens(name: str) -> int | None:
    """Tokens an agent CLI runtime's own system prompt and tools add to every request (None: not an
    agent CLI, or not measured)."""
    value = getattr(class_named(REGISTRY, name, "runtime"), "request_tokens", None)
    return int(value) if value is not None else None


def reports_usage(name: str, options: dict[str, Any] | None = None) -> bool:
    """Whether the runtime's probes record usage and cost: False for an agent CLI that reports no token
    counts (Copilot CLI) when it runs without the probe's relay (``runtime_options.relay = false``)."""
    cls = class_named(REGISTRY, name, "runtime")
    if getattr(cls, "reports_usage", True):
        return True
    return hasattr(cls, "relay") and bool((options or {}).get("relay", True))


def forced_choice_note(name: str, options: dict[str, Any]) -> str | None:
    """The one line the reports print for a forced-choice study (``runtime_options.tool_choice`` set to
    the runtime's ``forced_choice``: ``any`` for anthropic, ``required`` for openai-compatible); None
    for a free-choice study."""
    forced = getattr(class_named(REGISTRY, name, "runtime"), "forced_choice", None)
    choice = options.get("tool_choice")
    if forced is None or choice != forced:
        return None
    return (
        f"forced choice (tool_choice={choice}): every routing request had to load a skill, so "
        "abstention is not measured (no-skill queries and false activations say nothing here)"
    )


JUDGES: dict[str, str] = {
    "fake": "skillreach.study.judge:FakeJudge",
    "anthropic": "skillreach.runtimes.judge_anthropic:AnthropicJudge",
}
"""Rubric judges by name, like the runtimes."""


def get_judge(name: str, **options: Any) -> Judge:
    """Build the judge called ``name`` (``fake``, ``anthropic``) with its options."""
    judge: Judge = build_named(JUDGES, name, "judge", **options)
    return judge
