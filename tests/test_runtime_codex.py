"""The codex runtime's parts that need no Codex CLI: the two signals folded together (the captured
``--json`` run, OTel records), the OTLP/HTTP receiver, the generated ``config.toml``, the options; and
the Responses API stand-in's stream. The real CLI is ``tests/test_runtime_realcli_codex.py``."""

from __future__ import annotations

import asyncio
import gzip
import json
import tomllib
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from skillreach.errors import ConfigError
from skillreach.runtimes import get_runtime
from skillreach.runtimes.codex import CodexRuntime, CodexStream, OtlpReceiver, codex_command_skill
from skillreach.settings import Settings
from skillreach.study.contract import ProbeOptions, Tracker
from tests.fakes.responses_api import ResponsesAPI, ResponsesScript, listing_of, query_of

CAPTURES = Path(__file__).resolve().parents[2] / "shared" / "design" / "agent-clis"
NAMES = frozenset({"git-changelog", "pdf-report"})


def stream(expected: str | None = None, **options: Any) -> CodexStream:
    tracker = Tracker(expected, options=ProbeOptions(**options), max_turns=options.get("max_turns", 3))
    folders = {n: Path("/w/.agents/skills") / n for n in NAMES}
    return CodexStream(folders, Path("/w"), tracker, names=NAMES)


def otel(skill: str) -> dict[str, Any]:
    return {"event.name": "codex.skill_invocation", "skill.name": skill, "skill.scope": "repo"}


def command(item: str, cmd: str) -> dict[str, Any]:
    return {"type": "item.started", "item": {"id": item, "type": "command_execution", "command": cmd}}


def test_the_captured_run_is_an_activation_from_the_command() -> None:
    capture = CAPTURES / "codex-activation-run.jsonl"
    if not capture.is_file():
        pytest.skip("../shared/design/agent-clis is not present beside the checkout")
    state = stream(None)
    for line in capture.read_text().splitlines():
        state.feed(json.loads(line))
    assert state.tracker.invoked == ["git-changelog"]
    assert state.signals == {"command": 1}
    assert state.final_text == "DONE: skill was loaded."
    assert state.error is None  # the "model metadata not found" item is not an error
    assert state.usage.input_tokens == 20
    assert state.turns == 1


def test_each_read_counts_once_whichever_signal_sees_it_first() -> None:
    state = stream(None, early_exit=False, max_turns=5)
    state.record_otel(otel("pdf-report"))  # Codex's record comes before the command's item
    state.feed(command("i1", "/bin/bash -lc 'cat r0/pdf-report/SKILL.md'"))
    state.feed(command("i2", "/bin/bash -lc 'cat /w/.agents/skills/git-changelog/SKILL.md'"))
    state.feed({"type": "item.completed", "item": {"id": "i2", "type": "command_execution", "command": "x"}})
    state.record_otel(otel("git-changelog"))
    state.record_otel(otel("pdf-report"))
    state.record_otel(otel("imagegen"))  # not in the catalog: reported, never scored
    assert state.tracker.invoked == ["pdf-report", "git-changelog", "pdf-report"]
    assert state.signals == {"otel": 2, "command": 1}
    assert state.outside == {"imagegen"}


def test_the_target_stops_the_probe_at_once() -> None:
    stopped: list[bool] = []
    state = stream("git-changelog")
    state.on_stop = lambda: stopped.append(True)
    state.record_otel(otel("pdf-report"))
    assert stopped == []
    state.record_otel(otel("git-changelog"))
    assert stopped == [True]
    assert state.tracker.early_exit
    assert state.feed(command("i9", "cat r0/pdf-report/SKILL.md")) is False  # nothing more is counted
    assert state.tracker.invoked == ["pdf-report", "git-changelog"]


def test_usage_comes_from_the_response_records_and_errors_from_the_stream() -> None:
    state = stream(None)
    for n in (100, 150):
        state.record_otel(
            {
                "event.name": "codex.sse_event",
                "event.kind": "response.completed",
                "input_token_count": str(n),
                "output_token_count": "10",
                "cached_token_count": 40,
            }
        )
    state.record_otel({"event.name": "codex.sse_event", "event.kind": "response.completed"})
    assert state.turns == 2
    assert (state.usage.input_tokens, state.usage.cache_read_input_tokens, state.usage.output_tokens) == (
        170,
        80,
        20,
    )
    state.feed({"type": "turn.failed", "error": {"message": "stream disconnected before completion"}})
    assert state.error == "codex: stream disconnected before completion"


def test_which_skill_a_command_reads() -> None:
    assert (
        codex_command_skill("/bin/bash -lc 'cat .agents/skills/pdf-report/SKILL.md'", NAMES) == "pdf-report"
    )
    assert codex_command_skill('sed -n 1,40p "r0/git-changelog/SKILL.md"', NAMES) == "git-changelog"
    assert codex_command_skill("cat r0/other/SKILL.md", NAMES) is None
    assert codex_command_skill("ls .agents/skills", NAMES) is None


async def test_the_receiver_takes_otlp_json_exports() -> None:
    seen: list[dict[str, Any]] = []
    attrs = [
        {"key": "event.name", "value": {"stringValue": "codex.skill_invocation"}},
        {"key": "skill.name", "value": {"stringValue": "pdf-report"}},
        {"key": "attempt", "value": {"intValue": "0"}},
    ]
    payload = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"attributes": attrs}, {"attributes": []}]}]}]}

    def post(url: str, data: bytes, headers: dict[str, str]) -> int:
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status)

    async with OtlpReceiver(seen.append) as receiver:
        raw = json.dumps(payload).encode()
        plain = await asyncio.to_thread(post, receiver.endpoint, raw, {"content-type": "application/json"})
        zipped = await asyncio.to_thread(
            post, receiver.endpoint, gzip.compress(raw), {"content-encoding": "gzip"}
        )
        await receiver.drain()
    assert (plain, zipped) == (200, 200)
    assert receiver.records == 4
    assert seen[0] == {"event.name": "codex.skill_invocation", "skill.name": "pdf-report", "attempt": "0"}


def test_the_generated_config_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-secret")
    rt = CodexRuntime(
        "gpt-test",
        codex_path="true",
        settings=Settings(),
        base_url="http://127.0.0.1:9/v1",
        env_key="MY_KEY",
        context_window=100_000,
    )
    text = rt._config("gpt-test", "http://127.0.0.1:5/v1/logs")
    config = tomllib.loads(text)
    assert config["model"] == "gpt-test"
    assert config["approval_policy"] == "never"
    assert config["sandbox_mode"] == "read-only"
    assert config["model_context_window"] == 100_000
    assert config["analytics"] == {"enabled": False}
    assert config["skills"]["bundled"] == {"enabled": False}
    provider = config["model_providers"][config["model_provider"]]
    assert provider == {
        "name": "skillreach",
        "base_url": "http://127.0.0.1:9/v1",
        "env_key": "MY_KEY",
        "wire_api": "responses",
    }
    assert config["otel"]["exporter"]["otlp-http"] == {
        "endpoint": "http://127.0.0.1:5/v1/logs",
        "protocol": "json",
    }
    assert "sk-secret" not in text  # the key stays in the environment
    env = rt._env(tmp_path)
    assert env["MY_KEY"] == "sk-secret"
    assert env["CODEX_HOME"] == str(tmp_path / "codex-home")
    assert env["HOME"] == str(tmp_path / "home")
    assert rt._scrub("failed with sk-secret") == "failed with ***"
    assert rt.effective_context_window == 100_000


def test_options_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="set OPENAI_API_KEY"):
        CodexRuntime(codex_path="true", settings=Settings())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with pytest.raises(ConfigError, match="codex program not found"):
        CodexRuntime(codex_path="/nowhere/codex", settings=Settings())
    with pytest.raises(ConfigError, match="sandbox"):
        CodexRuntime(codex_path="true", settings=Settings(), sandbox="anything")
    with pytest.raises(ConfigError, match="codex_pth"):
        get_runtime("codex", codex_pth="true")
    rt = get_runtime("codex", codex_path="true", context_window=1_000_000)
    assert isinstance(rt, CodexRuntime)
    assert rt.effective_context_window == 272_000


def test_the_stand_in_streams_a_turn_and_reads_the_listed_path() -> None:
    listing = (
        "<skills_instructions>\n## Skills\n### Skill roots\n- `r0` = `/w/.agents/skills`\n"
        "### Available skills\n"
        "- pdf-report: Build PDFs. (file: r0/pdf-report/SKILL.md)\n</skills_instructions>"
    )
    body = {
        "model": "m",
        "stream": True,
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": listing}]},
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "<environment_context>"}],
            },
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "make a pdf"}]},
        ],
    }
    assert query_of(body) == "make a pdf"
    assert listing_of(body) == listing
    with ResponsesAPI(ResponsesScript({"pdf": ["pdf-report"]})) as api:
        req = urllib.request.Request(
            f"{api.base_url}/responses",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.headers["content-type"] == "text/event-stream"
            events = [
                json.loads(line[6:])
                for line in resp.read().decode().splitlines()
                if line.startswith("data: ")
            ]
    kinds = [e["type"] for e in events]
    assert kinds == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    call = events[2]["item"]
    assert call["type"] == "function_call"
    assert call["name"] == "exec_command"
    assert json.loads(call["arguments"]) == {"cmd": "cat /w/.agents/skills/pdf-report/SKILL.md"}
    assert events[3]["response"]["usage"]["input_tokens"] > 0


FAKE_CODEX = """#!{python}
import json, os, sys
sys.stderr.write("ERROR codex_core::session: failed to load skill "
                 + os.getcwd() + "/.agents/skills/pdf/SKILL.md: missing YAML frontmatter delimited by ---\\n")
sys.stderr.write("ERROR failed to load skill " + os.getcwd()
                 + "/.agents/skills/rollback/deploy/SKILL.md: missing YAML frontmatter delimited by ---\\n")
print(json.dumps({{"type": "turn.completed", "usage": {{"input_tokens": 5, "output_tokens": 1}}}}))
"""


async def test_a_catalog_skill_codex_cannot_load_fails_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from tests.fakes.kit import folder_catalog, probe, query

    fake = tmp_path / "codex"
    fake.write_text(FAKE_CODEX.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    # no relay: this stand-in calls no model, the usage is the one it prints
    rt = CodexRuntime(codex_path=str(fake), settings=Settings(), otel=False, relay=False)
    out, _ = await probe(rt, folder_catalog(tmp_path), query("make a pdf", "pdf"), timeout_s=30)
    await rt.aclose()
    assert out.error == (
        "residency check failed: codex could not load catalog skills: "
        "pdf (missing YAML frontmatter delimited by ---)"
    )
    assert out.usage.input_tokens == 5


def test_compliance_steps_after_the_target_come_from_codex_tool_records() -> None:
    state = stream("pdf-report", compliance=True, early_exit=False)
    state.otel_tools = True
    state.record_otel(
        {"event.name": "codex.tool_result", "tool_name": "exec_command", "arguments": '{"cmd": "ls"}'}
    )
    state.record_otel(otel("pdf-report"))
    read = '{"cmd": "cat r0/pdf-report/SKILL.md"}'
    state.record_otel({"event.name": "codex.tool_result", "tool_name": "exec_command", "arguments": read})
    state.feed(command("i2", "touch x"))  # the --json item is not the source when the records are
    state.record_otel(
        {"event.name": "codex.tool_result", "tool_name": "exec_command", "arguments": '{"cmd": "x"}'}
    )
    assert [c.input for c in state.tool_calls] == [{"cmd": "x"}]  # not the call before, nor the read

    plain = stream("pdf-report", compliance=True, early_exit=False)
    plain.feed(command("i1", "cat r0/pdf-report/SKILL.md"))
    plain.feed(command("i2", "/bin/bash -lc 'touch x'"))
    assert [(c.tool, c.input) for c in plain.tool_calls] == [
        ("exec_command", {"cmd": "/bin/bash -lc 'touch x'"})
    ]
