"""The Messages API stand-in scripted for the world of :mod:`tests.helpers.world`."""

from __future__ import annotations

from typing import Any

from tests.fakes.messages_api import ScriptResponder
from tests.helpers.world import SKILLS

__all__ = ["MODEL", "SNAPSHOT", "responder"]

MODEL = "claude-sonnet-4-6"
SNAPSHOT = "claude-sonnet-4-6-20260115"  # what the stand-in resolves the alias to


def responder() -> ScriptResponder:
    """The agent loads the skill a query is about (the canaries name it outright)."""
    script: dict[str, list[Any]] = {}
    for name in SKILLS:
        script[f"with {name} task"] = [name]
        script[f"the {name} skill"] = [name]
    return ScriptResponder(script)
