"""Lines in the formats agents record, written from their public documentation (our own text).

- Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``): a user prompt, an
  assistant message with a ``Skill`` tool_use, the ``tool_result`` that answers it (``toolUseResult``
  with ``commandName`` and ``success``), the meta line ``Base directory for this skill: …`` that loads
  the skill's text, and the assistant text and other tools' traffic that make up most of a transcript.
- The OpenTelemetry Collector's file exporter (OTLP JSON, one export a line): Claude Code's events
  (``claude_code.user_prompt``, ``claude_code.skill_activated``, ``claude_code.tool_result``,
  ``claude_code.api_request``), Codex's ``codex.skill_invocation`` and GenAI ``execute_tool`` spans.

Used by the ingest tests, the live usage tests and ``bench/ingest.py``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "cc_assistant_text",
    "cc_base_dir",
    "cc_other_tool",
    "cc_prompt",
    "cc_skill_call",
    "cc_skill_result",
    "iso",
    "otlp_logs",
    "otlp_record",
    "otlp_spans",
    "tool_span",
]


def iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _common(
    session: str,
    at: datetime,
    uuid: str,
    parent: str | None,
    *,
    cwd: str,
    branch: str | None,
    sidechain: bool,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "parentUuid": parent,
        "isSidechain": sidechain,
        "userType": "external",
        "cwd": cwd,
        "sessionId": session,
        "version": "2.1.0",
    }
    if branch is not None:
        out["gitBranch"] = branch
    out.update({"uuid": uuid, "timestamp": iso(at)})
    return out


def cc_prompt(
    session: str,
    at: datetime,
    uuid: str,
    text: str,
    *,
    parent: str | None = None,
    cwd: str = "/work/app",
    branch: str | None = "main",
    sidechain: bool = False,
) -> str:
    return _dumps(
        {
            **_common(session, at, uuid, parent, cwd=cwd, branch=branch, sidechain=sidechain),
            "promptId": f"prompt-{uuid}",
            "type": "user",
            "message": {"role": "user", "content": text},
        }
    )


def cc_skill_call(
    session: str,
    at: datetime,
    uuid: str,
    call_id: str,
    skill: str,
    *,
    model: str = "claude-sonnet-4-5-20250929",
    parent: str | None = None,
    cwd: str = "/work/app",
    branch: str | None = "main",
    sidechain: bool = False,
) -> str:
    message = {
        "id": f"msg_{call_id}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "tool_use", "id": call_id, "name": "Skill", "input": {"skill": skill}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 1200, "output_tokens": 40},
    }
    return _dumps(
        {
            **_common(session, at, uuid, parent, cwd=cwd, branch=branch, sidechain=sidechain),
            "type": "assistant",
            "message": message,
            "requestId": f"req_{call_id}",
        }
    )


def cc_skill_result(
    session: str,
    at: datetime,
    uuid: str,
    call_id: str,
    ran: str,
    *,
    success: bool = True,
    parent: str | None = None,
    cwd: str = "/work/app",
    branch: str | None = "main",
    sidechain: bool = False,
) -> str:
    content = [{"tool_use_id": call_id, "type": "tool_result", "content": f"Launching skill: {ran}"}]
    return _dumps(
        {
            **_common(session, at, uuid, parent, cwd=cwd, branch=branch, sidechain=sidechain),
            "type": "user",
            "message": {"role": "user", "content": content},
            "toolUseResult": {"success": success, "commandName": ran},
        }
    )


def cc_base_dir(
    session: str,
    at: datetime,
    uuid: str,
    folder: str,
    body: str = "# Skill\n\nSteps.",
    *,
    call_id: str | None = None,
    parent: str | None = None,
    cwd: str = "/work/app",
    branch: str | None = "main",
) -> str:
    obj = {
        **_common(session, at, uuid, parent, cwd=cwd, branch=branch, sidechain=False),
        "type": "user",
        "isMeta": True,
        "message": {
            "role": "user",
            "content": [{"type": "text", "text": f"Base directory for this skill: {folder}\n\n{body}"}],
        },
    }
    if call_id is not None:
        obj["sourceToolUseID"] = call_id
    return _dumps(obj)


def cc_assistant_text(
    session: str,
    at: datetime,
    uuid: str,
    text: str,
    *,
    model: str = "claude-sonnet-4-5-20250929",
    cwd: str = "/work/app",
) -> str:
    message = {
        "id": f"msg_{uuid}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 2100, "output_tokens": 180, "cache_read_input_tokens": 1800},
    }
    return _dumps(
        {
            **_common(session, at, uuid, None, cwd=cwd, branch="main", sidechain=False),
            "type": "assistant",
            "message": message,
            "requestId": f"req_{uuid}",
        }
    )


def cc_other_tool(
    session: str,
    at: datetime,
    uuid: str,
    call_id: str,
    *,
    result: bool,
    cwd: str = "/work/app",
    output_lines: int = 8,
) -> str:
    """A Bash tool call (``result=False``) or its result (``True``): the traffic most lines are."""
    common = _common(session, at, uuid, None, cwd=cwd, branch="main", sidechain=False)
    if not result:
        message = {
            "id": f"msg_{call_id}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [
                {
                    "type": "tool_use",
                    "id": call_id,
                    "name": "Bash",
                    "input": {"command": "ls -la src", "description": "List the sources"},
                }
            ],
        }
        return _dumps({**common, "type": "assistant", "message": message})
    out = "total 48\n" + "".join(
        f"-rw-r--r--  1 dev dev  {i * 97} Mar  1 09:00 module_{i}.py\n" for i in range(output_lines)
    )
    return _dumps(
        {
            **common,
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"tool_use_id": call_id, "type": "tool_result", "content": out}],
            },
            "toolUseResult": {"stdout": out, "stderr": "", "interrupted": False},
        }
    )


# ------------------------------------------------------------------------------------------- OTLP


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def _attributes(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in attrs.items()]


def otlp_record(event: str, at: datetime, attrs: dict[str, Any]) -> dict[str, Any]:
    """One log record: the body names the event (``claude_code.user_prompt``), ``event.name`` too."""
    nanos = str(int(at.timestamp() * 1_000_000) * 1000)
    short = event.split(".", 1)[1] if event.startswith("claude_code.") else event
    return {
        "timeUnixNano": nanos,
        "observedTimeUnixNano": nanos,
        "severityNumber": 9,
        "body": {"stringValue": event},
        "attributes": _attributes({"event.name": short, "event.timestamp": iso(at), **attrs}),
    }


def otlp_logs(records: list[dict[str, Any]], *, service: str = "claude-code", version: str = "2.1.0") -> str:
    """One line of the file exporter: a ``resourceLogs`` export holding ``records``."""
    scope = "com.anthropic.claude_code.events" if service == "claude-code" else f"{service}.otel"
    return _dumps(
        {
            "resourceLogs": [
                {
                    "resource": {
                        "attributes": _attributes({"service.name": service, "service.version": version})
                    },
                    "scopeLogs": [{"scope": {"name": scope, "version": version}, "logRecords": records}],
                }
            ]
        }
    )


def tool_span(
    span_id: str,
    at: datetime,
    tool: str,
    arguments: dict[str, Any] | None = None,
    *,
    conversation: str = "conv-1",
    error: bool = False,
) -> dict[str, Any]:
    """A GenAI ``execute_tool`` span (semantic conventions: ``gen_ai.operation.name``, ``gen_ai.tool.name``,
    the opt-in ``gen_ai.tool.call.arguments``)."""
    start = int(at.timestamp() * 1_000_000) * 1000
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": f"call_{span_id}",
        "gen_ai.conversation.id": conversation,
    }
    if arguments is not None:
        attrs["gen_ai.tool.call.arguments"] = json.dumps(arguments)
    return {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": span_id,
        "name": f"execute_tool {tool}",
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 2_000_000),
        "attributes": _attributes(attrs),
        "status": {"code": 2} if error else {},
    }


def otlp_spans(spans: list[dict[str, Any]], *, service: str = "my-agent") -> str:
    return _dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": _attributes({"service.name": service})},
                    "scopeSpans": [{"scope": {"name": "agent.tracer"}, "spans": spans}],
                }
            ]
        }
    )
