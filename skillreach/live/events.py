"""``LiveEvent``: one thing an agent recorded in production, whatever wrote it.

Every reader (Claude Code transcripts, OpenTelemetry logs and spans from the Collector's file exporter,
Codex's ``codex.skill_invocation``) turns its lines into these; the store keeps them (one row each,
unique by ``(source, event_id)`` so re-reading adds nothing); ``skillreach usage`` and the live gate
read them back.

- ``kind="prompt"``: a user prompt, the denominator of an activation share.
- ``kind="skill"``: a skill call. ``skill`` is the skill the agent asked for (``input.skill``,
  ``skill_name``, ``skill.name``, ``gen_ai.tool.name`` of a skill span); ``skill_ran`` the one that
  actually ran when the source says (``commandName`` of the tool result), ``success`` whether it did.
  ``hidden`` marks a call whose source hid the name (Claude Code without ``OTEL_LOG_TOOL_DETAILS=1``
  reports ``custom_skill``): counted apart, never attributed to a skill.

Nothing personal by default: ``prompt_text`` is kept only under ``--keep-prompts`` (and redacted then);
ids and counts otherwise.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field, field_validator

from skillreach.models import Frozen

__all__ = ["UNKNOWN_VERSION", "EventKind", "LiveEvent"]

UNKNOWN_VERSION = "unknown"
"""The ``skill_version`` of an event whose version could not be resolved: never a guess."""


class EventKind(StrEnum):
    PROMPT = "prompt"
    SKILL = "skill"


class LiveEvent(Frozen):
    """One prompt or one skill call, as an agent recorded it."""

    source: str = Field(
        max_length=512, description="The source it was read from (reader kind and root folder)."
    )
    event_id: str = Field(max_length=256, description="Unique within its source; stable across re-reads.")
    kind: EventKind
    at: datetime = Field(description="When it happened (timezone-aware, UTC).")
    agent: str = Field(
        max_length=64, description="claude-code, codex, … or otel when the source does not say."
    )
    session_id: str = Field(default="", max_length=256)
    prompt_id: str | None = Field(
        default=None, max_length=256, description="The prompt a skill call answers."
    )
    skill: str | None = Field(default=None, max_length=256, description="The skill asked for (kind=skill).")
    skill_ran: str | None = Field(
        default=None, max_length=256, description="The skill that ran, when reported."
    )
    success: bool | None = None
    hidden: bool = Field(default=False, description="The source hid the skill's name (e.g. custom_skill).")
    invocation: str | None = Field(
        default=None, max_length=32, description="implicit or explicit, when said."
    )
    model: str | None = Field(default=None, max_length=256)
    cwd: str | None = Field(default=None, max_length=4096)
    git_branch: str | None = Field(default=None, max_length=256)
    sidechain: bool = Field(
        default=False, description="Recorded by a subagent: kept apart from the main agent."
    )
    skill_dir: str | None = Field(
        default=None, max_length=4096, description="The 'Base directory for this skill:'."
    )
    skill_version: str = Field(default=UNKNOWN_VERSION, max_length=128)
    prompt_text: str | None = Field(default=None, max_length=100_000, description="Only with --keep-prompts.")

    @field_validator("at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("a live event's time must carry a timezone")
        return value
