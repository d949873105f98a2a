"""The readers of the gemini-cli, opencode and copilot runtimes' JSON events, fed the event shapes of the
captures in ``../shared/design/agent-clis/`` (no CLI needed): the skill tool's own signal is the
activation, a failed load is the probe's error, skills outside the catalog are reported, never scored,
and the stream says stop once the decision is known."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skillreach.models import Query, QueryKind
from skillreach.runtimes._skillcli import SkillToolStream
from skillreach.runtimes.copilot import CopilotStream
from skillreach.runtimes.gemini_cli import GeminiStream
from skillreach.runtimes.opencode import OpenCodeStream
from skillreach.study.contract import ProbeOptions, Tracker

NAMES = frozenset({"pdf", "secrets", "rollback"})


def stream(cls: type[SkillToolStream], expected: str | None = "secrets") -> SkillToolStream:
    kind = QueryKind.implicit if expected else QueryKind.out_of_scope
    q = Query(id="q1", text="rotate the keys", expected_skill=expected, kind=kind)
    return cls(
        {n: Path("/w") / n for n in NAMES}, Path("/w"), Tracker.for_query(q, ProbeOptions()), names=NAMES
    )


def gemini_call(tool_id: str, name: str, status: str = "success") -> list[dict[str, Any]]:
    return [
        {"type": "tool_use", "tool_name": "activate_skill", "tool_id": tool_id, "parameters": {"name": name}},
        {"type": "tool_result", "tool_id": tool_id, "status": status, "output": "Skill activated."},
    ]


def opencode_call(name: str, status: str = "completed") -> dict[str, Any]:
    state = {"status": status, "input": {"name": name}, "title": f"Loaded skill: {name}"}
    if status == "error":
        state["error"] = "ripgrep execution failed"
    return {"type": "tool_use", "part": {"type": "tool", "tool": "skill", "callID": "c", "state": state}}


def copilot_call(call: str, name: str, success: bool = True) -> list[dict[str, Any]]:
    return [
        {
            "type": "tool.execution_start",
            "data": {"toolCallId": call, "toolName": "skill", "arguments": {"skill": name}},
        },
        {
            "type": "tool.execution_complete",
            "data": {"toolCallId": call, "success": success, "result": {"content": "x"}},
        },
    ]


@pytest.mark.parametrize(
    ("cls", "rival", "target"),
    [
        (GeminiStream, gemini_call("t1", "pdf"), gemini_call("t2", "secrets")),
        (OpenCodeStream, [opencode_call("pdf")], [opencode_call("secrets")]),
        (CopilotStream, copilot_call("c1", "pdf"), copilot_call("c2", "secrets")),
    ],
)
def test_a_rival_then_the_target_stops_at_the_target(
    cls: type[SkillToolStream], rival: list[dict[str, Any]], target: list[dict[str, Any]]
) -> None:
    s = stream(cls)
    assert all(s.feed(e) for e in rival)
    assert [s.feed(e) for e in target][-1] is False
    assert s.tracker.invoked == ["pdf", "secrets"]
    assert s.stopped
    assert s.error is None


def test_gemini_counts_the_result_not_the_call_and_reports_a_refused_activation() -> None:
    s = stream(GeminiStream)
    assert s.feed(gemini_call("t1", "secrets")[0])
    assert s.tracker.invoked == []  # the call alone is no load
    s = stream(GeminiStream)
    for e in gemini_call("t1", "pdf", status="error"):
        assert s.feed(e)
    assert s.tracker.invoked == []
    assert s.error is not None
    assert "activate_skill 'pdf' failed" in s.error


def test_gemini_usage_text_and_a_built_in_skill() -> None:
    s = stream(GeminiStream, expected=None)
    for e in gemini_call("t1", "skill-creator"):
        assert s.feed(e)
    s.feed({"type": "message", "role": "assistant", "content": "Do", "delta": True})
    s.feed({"type": "message", "role": "assistant", "content": "ne.", "delta": True})
    s.feed(
        {
            "type": "result",
            "status": "success",
            "stats": {"input_tokens": 20, "output_tokens": 10, "cached": 5, "tool_calls": 1},
        }
    )
    assert s.tracker.invoked == []
    assert s.outside == {"skill-creator"}
    assert s.final_text == "Done."
    assert (s.usage.input_tokens, s.usage.cache_read_input_tokens, s.usage.output_tokens) == (15, 5, 10)
    assert s.turns == 2


def test_opencode_without_ripgrep_fails_the_probe_and_counts_steps() -> None:
    s = stream(OpenCodeStream)
    assert s.feed(opencode_call("secrets", status="error"))
    assert s.tracker.invoked == []
    assert s.error == "opencode: the skill tool failed on 'secrets': ripgrep execution failed"
    s.feed(
        {
            "type": "step_finish",
            "part": {"tokens": {"input": 10, "output": 5, "cache": {"read": 2, "write": 1}}},
        }
    )
    s.feed({"type": "text", "part": {"type": "text", "text": "Done."}})
    assert s.turns == 1
    assert s.usage.cache_read_input_tokens == 2
    assert s.final_text == "Done."


def test_copilot_reports_its_built_in_skills() -> None:
    s = stream(CopilotStream, expected=None)
    assert isinstance(s, CopilotStream)
    s.feed(
        {
            "type": "session.skills_loaded",
            "data": {
                "skills": [
                    {"name": "pdf", "source": "project"},
                    {"name": "customize-cloud-agent", "source": "builtin"},
                ]
            },
        }
    )
    for e in copilot_call("c1", "customize-cloud-agent"):
        assert s.feed(e)
    assert s.builtin == {"customize-cloud-agent"}
    assert s.outside == {"customize-cloud-agent"}
    assert s.tracker.invoked == []
