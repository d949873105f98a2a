"""Runtimes by name. Heavy SDKs are imported only when their runtime is asked for."""

from __future__ import annotations

from typing import Any

from skillreach._registry import build_named
from skillreach.study.contract import Outcome, ProbeOptions, Runtime, Tracker

__all__ = ["REGISTRY", "Outcome", "ProbeOptions", "Runtime", "Tracker", "get_runtime", "known_runtimes"]

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
