"""Runtimes by name. Heavy SDKs are imported only when their runtime is asked for."""

from __future__ import annotations

from typing import Any

from runtimes.base import Outcome, ProbeOptions, Runtime, Tracker
from skillreach._registry import build_named

__all__ = ["REGISTRY", "Outcome", "ProbeOptions", "Runtime", "Tracker", "get_runtime", "known_runtimes"]

# name -> "module:Class"; a plain dict, no plugin magic.
REGISTRY: dict[str, str] = {
    "fake": "runtimes.fake:FakeRuntime",
    "keyword": "runtimes.keyword:KeywordRuntime",
    "retriever": "runtimes.retriever:RetrieverRuntime",
    "anthropic": "runtimes.anthropic:AnthropicRuntime",
    "claude-code": "runtimes.claude_code:ClaudeCodeRuntime",
    "openai-compatible": "runtimes.openai_compat:OpenAICompatRuntime",
    "pi": "runtimes.pi:PiRuntime",
    "goose": "runtimes.goose:GooseRuntime",
    "antigravity-cli": "runtimes.antigravity_cli:AntigravityCliRuntime",
    "antigravity-sdk": "runtimes.antigravity_sdk:AntigravitySdkRuntime",
}


def known_runtimes() -> list[str]:
    return sorted(REGISTRY)


def get_runtime(name: str, **options: Any) -> Runtime:
    """Build the runtime called ``name`` with its options; an unknown name lists the known ones."""
    runtime: Runtime = build_named(REGISTRY, name, "runtime", **options)
    return runtime
