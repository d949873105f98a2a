"""Live usage: what agents actually load in production, read from what they record.

``events``: the one record every reader produces (``LiveEvent``): a user prompt (the denominator) or a
skill call (requested and ran), with its session, time, model, working folder and branch, and the
``skill_version`` of the skill as it was then (``git:<tree hash>``, ``sha256:<content>`` or ``unknown``,
never guessed). Readers of Claude Code transcripts and OpenTelemetry file exports, the cursors that make
``skillreach ingest`` incremental, the usage tables and the live gate build on it.

``readers`` (transcript and OTLP lines → events), ``files`` (the new complete lines of a file past its
cursor), ``versions`` (the skill's folder as it was at an event's time), ``ingest`` (``ingest_sources``:
all of it into the store, with its summary).
"""

from __future__ import annotations

from skillreach.live.events import UNKNOWN_VERSION, EventKind, LiveEvent

__all__ = ["UNKNOWN_VERSION", "EventKind", "LiveEvent"]
