"""Runtimes by name. Heavy SDKs are imported only when their runtime is asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillreach._registry import build_named, class_named

if TYPE_CHECKING:
    from skillreach.judge import Judge

from skillreach.study.contract import Outcome, ProbeOptions, Runtime, Tracker

__all__ = [
    "JUDGES",
    "REGISTRY",
    "Outcome",
    "ProbeOptions",
    "Runtime",
    "Tracker",
    "capability",
    "get_judge",
    "get_runtime",
    "known_runtimes",
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
    "goose": "skillreach.runtimes.goose:GooseRuntime",
    "antigravity-cli": "skillreach.runtimes.antigravity_cli:AntigravityCliRuntime",
    "antigravity-sdk": "skillreach.runtimes.antigravity_sdk:AntigravitySdkRuntime",
}


def known_runtimes() -> list[str]:
    return sorted(REGISTRY)


def get_runtime(name: str, **options: Any) -> Runtime:
    """Build the runtime called ``name`` with its options; an unknown name lists the known ones."""
    runtime: Runtime = build_named(REGISTRY, name, "runtime", **options)
    return runtime


def capability(name: str, what: str) -> bool:
    """A runtime's capability (``paid``, ``cached_listing``, ``batch_mode``), read off its class."""
    return bool(getattr(class_named(REGISTRY, name, "runtime"), what, False))


JUDGES: dict[str, str] = {
    "fake": "skillreach.judge:FakeJudge",
    "anthropic": "skillreach.runtimes.judge_anthropic:AnthropicJudge",
}
"""Rubric judges by name, like the runtimes."""


def get_judge(name: str, **options: Any) -> Judge:
    """Build the judge called ``name`` (``fake``, ``anthropic``) with its options."""
    judge: Judge = build_named(JUDGES, name, "judge", **options)
    return judge
