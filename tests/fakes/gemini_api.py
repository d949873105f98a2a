"""A local stand-in for the Gemini API as Gemini CLI (``@google/gemini-cli`` 0.61.0) calls it: real HTTP on
127.0.0.1, ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` with ``x-goog-api-key``.

Written from the public API reference and the captures in ``../shared/design/agent-clis/``: the request
carries ``contents`` (the first user content holds Gemini CLI's ``<session_context>`` part, then the
query; a tool's answer comes back as a ``user`` content with a ``functionResponse`` part),
``systemInstruction`` (the ``<available_skills>`` listing) and ``tools`` (``activate_skill`` among them,
unless its consent rule removed it). The answer is one SSE event ``data: {GenerateContentResponse}``:
``candidates[0].content.parts`` (``text`` or ``functionCall`` {name, args}), ``finishReason`` and
``usageMetadata``. Server and SSE framing are :class:`tests.fakes.antigravity_gemini.GeminiAPI`'s.

Scripted per query::

    with GeminiCliAPI({"rotate the keys": ["pdf", "secrets"]}) as api:
        ...  # GOOGLE_GEMINI_BASE_URL = api.base_url
        api.requests

A step that is a skill name answers ``activate_skill {"name": <skill>}``; ``{"text": ...}`` answers with
text; ``{"tool": name, "args": {...}}`` calls another tool. The n-th reply of a conversation is the n-th
step (n = the model turns so far); past the script, ``Done.``. A callable ``script`` (body → steps) may
replace the mapping.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.fakes.antigravity_gemini import GeminiAPI, model_turns

__all__ = ["GeminiCliAPI", "declared_tools", "query_of", "skill_listing"]

Script = dict[str, list[Any]] | Callable[[dict[str, Any]], list[Any]]


def query_of(body: dict[str, Any]) -> str:
    """The user's query: the first user content's text parts that are not Gemini CLI's context blocks."""
    for content in body.get("contents") or []:
        if content.get("role") == "user":
            texts = [str(p.get("text", "")) for p in content.get("parts") or [] if isinstance(p, dict)]
            return "\n".join(t for t in texts if t and not t.lstrip().startswith("<"))
    return ""


def skill_listing(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, description) of each skill in the system instruction's ``<available_skills>``, in order
    (sub-agents are listed with the same tags elsewhere in it)."""
    system = "".join(str(p.get("text", "")) for p in (body.get("systemInstruction") or {}).get("parts") or [])
    block = re.search(r"<available_skills>(.*?)</available_skills>", system, flags=re.S)
    if block is None:
        return []
    return re.findall(r"<name>(.*?)</name>\s*<description>(.*?)</description>", block.group(1), flags=re.S)


def declared_tools(body: dict[str, Any]) -> list[str]:
    return [
        str(d.get("name"))
        for tools in body.get("tools") or []
        for d in tools.get("functionDeclarations") or []
    ]


class GeminiCliAPI(GeminiAPI):
    """The Gemini API stand-in answering as a model that routes with ``activate_skill``."""

    def __init__(self, script: Script | None = None, **kw: Any) -> None:
        super().__init__(responder=self._scripted, **kw)
        self.script: Script = script or {}

    def steps_for(self, body: dict[str, Any]) -> list[Any]:
        if callable(self.script):
            return list(self.script(body))
        text = query_of(body)
        for key in sorted(self.script, key=len, reverse=True):
            if key in text:
                return self.script[key]
        return []

    def _scripted(self, body: dict[str, Any]) -> dict[str, Any]:
        steps = self.steps_for(body)
        turn = model_turns(body)
        step = steps[turn] if turn < len(steps) else None
        if isinstance(step, str):
            return self.response(calls=[("activate_skill", {"name": step})])
        if isinstance(step, dict) and "tool" in step:
            return self.response(calls=[(str(step["tool"]), dict(step.get("args") or {}))])
        if isinstance(step, dict) and "text" in step:
            return self.response(text=str(step["text"]))
        return self.response(text="Done.")
