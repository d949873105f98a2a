"""The ``goose`` runtime against a stand-in executable written from goose's public output format
(tests/fakes/goose_stub/goose). No real goose runs here: it is a binary download this machine cannot
fetch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Skill
from skillreach.runtimes import get_runtime
from skillreach.runtimes.goose import GooseRuntime, GooseStream
from skillreach.settings import load_settings
from skillreach.study.contract import Tracker
from tests.fakes.kit import assert_ended_live, folder_catalog, probe, stub_knobs
from tests.fakes.kit import query as q

STUB = Path(__file__).parent / "fakes" / "goose_stub" / "goose"


def make_catalog(tmp_path: Path) -> Catalog:
    return folder_catalog(tmp_path)


@pytest.fixture
def stub(tmp_path: Path) -> dict[str, Any]:
    return stub_knobs(tmp_path, "GOOSE", make_catalog(tmp_path))


def runtime(stub: dict[str, Any], **kw: Any) -> GooseRuntime:
    kw.setdefault("model", "claude-sonnet-4-5")
    kw["env"] = {**stub["env"], **kw.get("env", {})}
    return GooseRuntime(goose_path=str(STUB), **kw)


async def test_live_early_exit(stub: dict[str, Any]) -> None:
    stub["plan"]({"undo": ["secrets", "rollback", "pdf"]})
    rt = runtime(stub, env={"GOOSE_STUB_DELAY": "0.4"})
    out, _ = await probe(rt, stub["catalog"], q("undo the deploy", "rollback"))
    assert out.error is None
    assert out.invoked == ["secrets", "rollback"]
    assert out.early_exit
    assert_ended_live(stub["log"])


async def test_isolation_flags_and_endpoint(stub: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    stub["plan"]({"x": ["pdf"]})
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-xyz")
    monkeypatch.setenv("UNRELATED_SECRET", "nope")
    rt = runtime(stub, base_url="http://127.0.0.1:9")
    out, _ = await probe(rt, stub["catalog"], q("x", "pdf"), max_turns=2)
    assert out.invoked == ["pdf"]
    argv = json.loads((stub["log"] / "argv.json").read_text())
    assert argv[0] == "run"
    for flag in ("--no-session", "--no-profile"):
        assert flag in argv
    assert argv[argv.index("--output-format") + 1] == "stream-json"
    assert argv[argv.index("--with-builtin") + 1] == "summon"
    assert argv[argv.index("--max-turns") + 1] == "4"
    assert argv[argv.index("--text") + 1] == "x"
    env = json.loads((stub["log"] / "env.json").read_text())
    assert "skillreach-goose-" in env["HOME"]
    assert env["GOOSE_PATH_ROOT"].startswith(str(Path(env["HOME"]).parent))
    assert env["ANTHROPIC_HOST"] == "http://127.0.0.1:9"
    assert env["GOOSE_PROVIDER"] == "anthropic"
    assert env["GOOSE_MODEL"] == "claude-sonnet-4-5"
    assert env["GOOSE_MODE"] == "auto"
    assert "ANTHROPIC_API_KEY" in env["names"]
    assert "UNRELATED_SECRET" not in env["names"]


async def test_max_turns_and_other_tools(stub: dict[str, Any]) -> None:
    stub["plan"](
        {
            "x": [
                {"tool": "developer__shell", "args": {"command": "ls"}},
                "pdf",
                {
                    "tool": "developer__text_editor",
                    "args": {"command": "view", "path": ".agents/skills/secrets/SKILL.md"},
                },
                {
                    "tool": "developer__text_editor",
                    "args": {"command": "write", "path": ".agents/skills/pdf/x", "file_text": "y"},
                },
                "rollback",
            ]
        }
    )
    out, tracker = await probe(runtime(stub), stub["catalog"], q("x", "pdf"), max_turns=3, early_exit=False)
    assert out.invoked == ["pdf", "secrets", "rollback"]
    assert tracker.exhausted
    assert out.turns == 5  # assistant replies up to the one that exhausted the turns
    assert [c.tool for c in out.tool_calls] == ["developer__shell", "developer__text_editor"]


async def test_non_catalog_and_unknown_loads_are_not_invocations(stub: dict[str, Any]) -> None:
    stub["plan"]({"x": ["goose-doc-guide", "nonexistent"]})
    out, _ = await probe(runtime(stub), stub["catalog"], q("x", "pdf"))
    assert out.invoked == []
    assert out.final_text == "Done."
    assert [c.input for c in out.tool_calls] == [{"source": "goose-doc-guide"}, {"source": "nonexistent"}]


async def test_error_event_is_recorded(stub: dict[str, Any]) -> None:
    stub["plan"]({"x": [{"error": "Request failed: 529 Overloaded"}]})
    out, _ = await probe(runtime(stub), stub["catalog"], q("x", "pdf"))
    assert out.error is not None
    assert "Overloaded" in out.error


async def test_residency_checked_with_skills_list(stub: dict[str, Any], tmp_path: Path) -> None:
    stub["plan"]({"x": ["pdf"]})
    bad = Skill(name="Bad Name", description="d", body="b")  # goose would not discover a folder named so
    catalog = Catalog(id="t2", skills=(*stub["catalog"].skills, bad))
    out, _ = await probe(runtime(stub), catalog, q("x", "pdf"))
    assert out.error is not None
    assert "goose does not list resident skills" in out.error


def test_stream_parser_dedups_repeated_requests(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    tracker = Tracker("rollback", max_turns=3)
    state = GooseStream({s.name: Path(s.folder) for s in catalog.skills}, tmp_path, tracker, catalog)
    block = {
        "type": "toolRequest",
        "id": "r1",
        "toolCall": {
            "status": "success",
            "value": {"name": "skills__loadSkill", "arguments": {"name": "pdf"}},
        },
    }
    msg = {"type": "message", "message": {"role": "assistant", "id": "m1", "content": [block]}}
    assert state.feed(msg)
    assert state.feed(msg)
    assert tracker.invoked == ["pdf"]
    assert state.feed({"type": "model_change", "model": "claude-x-1", "mode": "auto"})
    assert state.model == "claude-x-1"
    assert state.feed({"type": "complete", "total_tokens": 1234})
    assert state.total_tokens == 1234
    # streamed text chunks of one message (same id) make one answer and one model reply
    for piece in ("Roll", "ed back."):
        chunk = {"role": "assistant", "id": "m9", "content": [{"type": "text", "text": piece}]}
        assert state.feed({"type": "message", "message": chunk})
    assert state.final_text == "Rolled back."
    assert state.requests == 2


def test_configuration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SKILLREACH_GOOSE_PATH", raising=False)
    with pytest.raises(ConfigError, match="goose program not found"):
        GooseRuntime(goose_path=str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="no known endpoint variable"):
        GooseRuntime(goose_path=str(STUB), provider="bedrock", base_url="http://x")
    monkeypatch.setenv("SKILLREACH_GOOSE_PATH", str(STUB))  # a setting: read by the settings, not the runtime
    assert get_runtime("goose", settings=load_settings()).executable == str(STUB)  # type: ignore[attr-defined]
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="goose program not found"):
        get_runtime("goose")
