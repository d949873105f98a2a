"""Compliance mode: an agent that loads the expected skill and then ends its turn with no text reports
``final_text=""`` — judged as a compliance failure by ``evaluate_probe`` — in every runtime that supports
compliance mode; text said before the skill loaded is not the answer; a routing-only probe still says
nothing about compliance (``final_text`` None)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillreach.models import Catalog, Checks, ProbeRecord, Query, Skill, ToolPattern
from skillreach.queries.compliance import evaluate_probe
from skillreach.runtimes.anthropic import AnthropicRuntime
from skillreach.runtimes.antigravity_cli import AgyStream
from skillreach.runtimes.claude_code import ClaudeCodeRuntime
from skillreach.runtimes.fake import FakeRuntime
from skillreach.runtimes.goose import GooseStream
from skillreach.runtimes.openai_compat import OpenAICompatRuntime
from skillreach.runtimes.pi import PiStream
from skillreach.settings import Settings
from skillreach.study.contract import Outcome, ProbeOptions, Tracker, compliance_answer
from tests.fakes.kit import folder_catalog, probe, query
from tests.fakes.messages_api import MessagesAPI, Reply, skill_call, turn_of
from tests.fakes.openai_chat import OpenAIChat, completion, tool_call

FAKES = Path(__file__).parent / "fakes"
CHECKS = Checks(requires=(ToolPattern(tool="Bash", pattern="make preflight"),))
CATALOG = Catalog(
    id="t",
    skills=(
        Skill(name="pdf", description="Fill PDF forms.", body="PDF BODY: run make preflight."),
        Skill(name="rollback", description="Roll back a deploy.", body="ROLLBACK BODY"),
    ),
)
COMPLIANCE = {"compliance": True, "early_exit": False}


def ship(expected: str = "pdf") -> Query:
    return query("fill the pdf form", expected, checks=CHECKS)


def judged(q: Query, out: Outcome) -> bool | None:
    record = ProbeRecord(
        query_id=q.id,
        invoked=tuple(out.invoked),
        error=out.error,
        tool_calls=tuple(out.tool_calls),
        final_text=out.final_text,
    )
    return evaluate_probe(q, record).compliance


def test_compliance_answer_rule() -> None:
    opts = ProbeOptions(compliance=True)
    loaded = Tracker("pdf", options=opts)
    loaded.invoke("pdf")
    assert compliance_answer(loaded, None) == ""
    assert compliance_answer(loaded, "Done.") == "Done."
    assert compliance_answer(Tracker("pdf", options=opts), None) is None  # never got past routing
    routing = Tracker("pdf")
    routing.invoke("pdf")
    assert compliance_answer(routing, None) is None


async def test_fake() -> None:
    rt = FakeRuntime({"q1": {"invoked": ["pdf"]}})
    silent, _ = await probe(rt, CATALOG, ship(), **COMPLIANCE)
    assert silent.final_text == ""
    assert judged(ship(), silent) is False
    routing, _ = await probe(rt, CATALOG, ship())
    assert routing.final_text is None
    assert judged(ship(), routing) is None


async def test_anthropic() -> None:
    def responder(body: dict[str, Any]) -> Reply:
        if turn_of(body) == 0:
            return Reply([{"type": "text", "text": "Loading the pdf skill."}, skill_call("pdf")])
        return Reply([], "end_turn")  # the turn ends with no text and no tool call

    with MessagesAPI(responder) as api:
        rt = AnthropicRuntime(
            "claude-sonnet-4-6", base_url=api.base_url, api_key="sk-test", settings=Settings()
        )
        out, _ = await probe(rt, CATALOG, ship(), **COMPLIANCE)
        await rt.aclose()
    assert out.error is None
    assert out.invoked == ["pdf"]
    assert out.final_text == ""  # "Loading the pdf skill." came before the skill: not the answer
    assert judged(ship(), out) is False


async def test_openai_compatible() -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return completion(
                model="m", text="Loading it.", tool_calls=[tool_call("Skill", {"skill": "pdf"})]
            )
        return completion(model="m", text=None)

    with OpenAIChat(responder=responder) as api:
        rt = OpenAICompatRuntime(model="m", base_url=api.base_url, api_key="k", backoff_s=0.01)
        out, _ = await probe(rt, CATALOG, ship(), **COMPLIANCE)
        await rt.aclose()
    assert out.error is None
    assert out.invoked == ["pdf"]
    assert out.final_text == ""
    assert judged(ship(), out) is False


async def test_claude_code(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text('{"*": [[{"text": "Let me load pdf."}, "pdf"], {"text": ""}]}')
    rt = ClaudeCodeRuntime(
        claude_path=str(FAKES / "claude_stub" / "claude"),
        settings=Settings(),
        extra_env={"CLAUDE_STUB_SCRIPT": str(script), "ANTHROPIC_API_KEY": "sk-test"},
    )
    catalog = folder_catalog(tmp_path, [("pdf", "Fill PDF forms."), ("rollback", "Roll back.")])
    out, _ = await probe(rt, catalog, ship(), **COMPLIANCE)
    await rt.aclose()
    assert out.error is None
    assert out.invoked == ["pdf"]
    assert out.final_text == ""
    assert judged(ship(), out) is False


def _skill_dirs(tmp_path: Path) -> dict[str, Path]:
    return {"pdf": tmp_path / "skills" / "pdf", "rollback": tmp_path / "skills" / "rollback"}


def test_pi_stream(tmp_path: Path) -> None:
    def run(options: ProbeOptions) -> PiStream:
        state = PiStream(_skill_dirs(tmp_path), tmp_path, Tracker.for_query(ship(), options))
        said = {"role": "assistant", "content": [{"type": "text", "text": "Reading the skill."}]}
        state.feed({"type": "message_end", "message": said})
        read = {"path": str(tmp_path / "skills" / "pdf" / "SKILL.md")}
        state.feed({"type": "tool_execution_start", "toolName": "read", "args": read})
        state.feed({"type": "message_end", "message": {"role": "assistant", "content": []}})
        return state

    assert run(ProbeOptions(**COMPLIANCE)).answer() == ""
    assert run(ProbeOptions(early_exit=False)).answer() == "Reading the skill."  # routing: as before


def test_goose_stream(tmp_path: Path) -> None:
    state = GooseStream(
        _skill_dirs(tmp_path), tmp_path, Tracker.for_query(ship(), ProbeOptions(**COMPLIANCE)), CATALOG
    )
    load = {"status": "success", "value": {"name": "summon__load", "arguments": {"source": "pdf"}}}
    first = {
        "role": "assistant",
        "id": "m1",
        "content": [
            {"type": "text", "text": "Loading."},
            {"type": "toolRequest", "id": "t1", "toolCall": load},
        ],
    }
    assert state.feed({"type": "message", "message": first})
    assert state.feed({"type": "message", "message": {"role": "assistant", "id": "m2", "content": []}})
    assert state.tracker.invoked == ["pdf"]
    assert state.answer() == ""


def test_agy_stream(tmp_path: Path) -> None:
    state = AgyStream(_skill_dirs(tmp_path), tmp_path, Tracker.for_query(ship(), ProbeOptions(**COMPLIANCE)))
    state.feed({"type": "message", "role": "assistant", "content": "Let me look.", "delta": True})
    view = {"AbsolutePath": str(tmp_path / "skills" / "pdf" / "SKILL.md")}
    assert state.feed({"type": "tool_use", "tool_name": "view_file", "tool_id": "v1", "parameters": view})
    state.feed({"type": "result", "status": "success", "stats": {}})
    assert state.tracker.invoked == ["pdf"]
    assert state.answer() == ""
