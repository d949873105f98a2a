"""The claude-code runtime against a stand-in ``claude`` executable (tests/fakes/claude_stub/claude)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query, QueryKind, Skill
from skillreach.runtimes.claude_code import ClaudeCodeRuntime
from skillreach.settings import Settings
from skillreach.study.contract import Outcome, ProbeOptions, Tracker

STUB = Path(__file__).parent / "fakes" / "claude_stub" / "claude"


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    skills = []
    for name in ("pdf", "docx", "xlsx", "pptx"):
        folder = tmp_path / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Work with {name} files.\n---\n# {name}\nBODY-{name}\n"
        )
        (folder / "reference.md").write_text(f"extra file of {name}\n")
        skills.append(
            Skill(
                name=name,
                description=f"Work with {name} files.",
                body=f"# {name}\nBODY-{name}\n",
                path=str(folder / "SKILL.md"),
                folder=str(folder),
            )
        )
    return Catalog(id="t", skills=tuple(skills))


@pytest.fixture
def stub_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    log = tmp_path / "stub.log"
    script = tmp_path / "script.json"

    def configure(entries: dict[str, Any]) -> Path:
        script.write_text(json.dumps(entries))
        return log

    return configure


def make(tmp_path: Path, **kw: Any) -> ClaudeCodeRuntime:
    env = {
        "CLAUDE_STUB_SCRIPT": str(tmp_path / "script.json"),
        "CLAUDE_STUB_LOG": str(tmp_path / "stub.log"),
        "ANTHROPIC_API_KEY": "sk-test-secret",
    }
    env.update(kw.pop("extra_env", {}))
    return ClaudeCodeRuntime(claude_path=str(STUB), settings=Settings(), extra_env=env, **kw)


def q(text: str = "please help", expected: str | None = "pdf") -> Query:
    kind = QueryKind.implicit if expected else QueryKind.out_of_scope
    return Query(id="q1", text=text, expected_skill=expected, kind=kind)


async def run(rt: ClaudeCodeRuntime, query: Query, catalog: Catalog, **opts: Any) -> tuple[Outcome, Tracker]:
    tracker = Tracker.for_query(query, ProbeOptions(**opts))
    out = await rt.select(query, catalog, tracker)
    return out, tracker


def log_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_early_exit_ends_the_whole_process_group(
    tmp_path: Path, catalog: Catalog, stub_env: Any
) -> None:
    log = stub_env(
        {"*": {"steps": ["docx", "pdf", "xlsx"], "sleep_after_skill": {"pdf": 30}, "spawn_child": True}}
    )
    rt = make(tmp_path)
    t0 = time.perf_counter()
    out, _ = await run(rt, q(), catalog)
    elapsed = time.perf_counter() - t0
    await rt.aclose()
    assert out.error is None
    assert out.invoked == ["docx", "pdf"]
    assert out.early_exit
    assert elapsed < 10  # not the stub's 30 s sleep
    entry = log_lines(log)[0]
    # its own session and group: the supervisor's, which it runs under (runtimes/_reaper.py)
    assert entry["pgid"] == entry["sid"] == rt.pids[0]
    assert not alive(entry["pid"])
    assert not alive(entry["child"])  # the grandchild in its group was ended too
    assert not any("survived" in e for e in log_lines(log))
    # without a result event, usage is summed over the assistant messages and priced
    assert out.usage.output_tokens == 40
    assert out.cost_usd is not None
    assert out.cost_usd > 0
    assert out.resolved_model == "claude-sonnet-4-6-20260115"


async def test_folder_holds_exactly_the_catalog_and_home_is_isolated(
    tmp_path: Path, catalog: Catalog, stub_env: Any
) -> None:
    log = stub_env({"*": ["pdf"]})
    rt = make(tmp_path)
    out, _ = await run(rt, q(), catalog)
    entry = log_lines(log)[0]
    await rt.aclose()
    assert out.error is None
    assert entry["skills_found"] == sorted(catalog.names)
    assert entry["home"] != os.environ.get("HOME")
    assert entry["config_dir"].startswith(entry["home"])
    assert entry["cwd"].startswith(str(rt._root))
    argv = entry["argv"]
    for flag in ("-p", "--verbose", "--strict-mcp-config", "--no-session-persistence"):
        assert flag in argv
    assert argv[argv.index("--output-format") + 1] == "stream-json"
    assert argv[argv.index("--tools") + 1] == "Skill"
    assert argv[argv.index("--setting-sources") + 1] == "project"
    assert json.loads(argv[argv.index("--settings") + 1])["disableBundledSkills"] is True
    # the probe's folder is gone afterwards
    assert not Path(entry["cwd"]).exists()


async def test_a_stranger_in_the_init_event_is_a_residency_error(
    tmp_path: Path, catalog: Catalog, stub_env: Any
) -> None:
    stub_env({"*": {"steps": ["pdf"], "stranger": ["deep-research"]}})
    rt = make(tmp_path)
    out, _ = await run(rt, q(), catalog)
    await rt.aclose()
    assert out.error is not None
    assert "not in the catalog: deep-research" in out.error
    assert out.invoked == []


async def test_a_missing_catalog_skill_is_a_residency_error(
    tmp_path: Path, catalog: Catalog, stub_env: Any
) -> None:
    stub_env({"*": {"steps": ["pdf"], "hide": ["xlsx"]}})
    rt = make(tmp_path)
    out, _ = await run(rt, q(), catalog)
    await rt.aclose()
    assert out.error is not None
    assert "missing from the agent: xlsx" in out.error


async def test_known_builtins_are_reported_not_mixed_in(
    tmp_path: Path, catalog: Catalog, stub_env: Any, caplog: pytest.LogCaptureFixture
) -> None:
    stub_env({"*": ["doctor", "pdf"]})
    rt = make(tmp_path, extra_env={"DISABLE_DOCTOR_COMMAND": "0"})
    out, _ = await run(rt, q(), catalog)
    await rt.aclose()
    assert "built-in skill 'doctor' beside the catalog" in caplog.text
    assert out.error is None
    assert rt.non_catalog_residents == {"doctor"}
    assert out.invoked == ["pdf"]  # an invocation of a non-catalog built-in is not an activation


async def test_max_turns_stops_the_process(tmp_path: Path, catalog: Catalog, stub_env: Any) -> None:
    log = stub_env({"*": {"steps": ["docx", "xlsx", "pptx", "pdf"], "sleep_after_skill": {"xlsx": 30}}})
    rt = make(tmp_path)
    out, tracker = await run(rt, q(), catalog, max_turns=2)
    await rt.aclose()
    assert out.invoked == ["docx", "xlsx"]
    assert tracker.exhausted
    assert not alive(log_lines(log)[0]["pid"])
    argv = log_lines(log)[0]["argv"]
    assert argv[argv.index("--max-turns") + 1] == "3"


async def test_result_event_gives_cost_usage_and_turns(
    tmp_path: Path, catalog: Catalog, stub_env: Any
) -> None:
    stub_env({"*": ["docx"]})
    rt = make(tmp_path)
    out, _ = await run(rt, q(), catalog)
    await rt.aclose()
    assert out.error is None
    assert out.invoked == ["docx"]
    assert out.turns == 2
    assert out.cost_usd == pytest.approx(0.002)
    assert out.usage.cache_read_input_tokens == 2000


async def test_api_error_and_silent_exit_are_errors(tmp_path: Path, catalog: Catalog, stub_env: Any) -> None:
    stub_env(
        {
            "boom": {"api_error": "API Error: 400 model: not-a-model"},
            "quiet": {"steps": [], "no_result": True, "exit_code": 3},
        }
    )
    rt = make(tmp_path)
    a, _ = await run(rt, q("boom"), catalog)
    b, _ = await run(rt, q("quiet"), catalog)
    await rt.aclose()
    assert a.error == "claude: API Error: 400 model: not-a-model"
    assert b.error is not None
    assert b.error.startswith("claude exited with code 3 without a result")


async def test_timeout_ends_the_process_group(tmp_path: Path, catalog: Catalog, stub_env: Any) -> None:
    log = stub_env({"*": {"steps": ["docx", "pdf"], "sleep_after_skill": {"docx": 30}, "spawn_child": True}})
    rt = make(tmp_path, timeout_s=3.0)  # the stand-in sleeps 30 s; 3 s let a loaded machine start it
    out, _ = await run(rt, q(), catalog)
    await rt.aclose()
    assert out.error == "claude did not finish within 3s"
    assert out.invoked == ["docx"]
    entry = log_lines(log)[0]
    assert not alive(entry["pid"])
    assert not alive(entry["child"])


async def test_compliance_mode_records_tool_calls(tmp_path: Path, catalog: Catalog, stub_env: Any) -> None:
    log = stub_env(
        {"*": ["pdf", {"tool": "Bash", "input": {"command": "make preflight"}}, {"text": "All done."}]}
    )
    rt = make(tmp_path)
    out, _ = await run(rt, q(), catalog, compliance=True)
    await rt.aclose()
    assert out.invoked == ["pdf"]
    assert [(c.tool, c.input) for c in out.tool_calls] == [("Bash", {"command": "make preflight"})]
    assert out.final_text == "All done."
    argv = log_lines(log)[0]["argv"]
    assert argv[argv.index("--tools") + 1] == "Skill,Bash,Read,Write,Edit"


async def test_a_query_that_looks_like_an_option_is_the_prompt(
    tmp_path: Path, catalog: Catalog, stub_env: Any
) -> None:
    log = stub_env({"--help me": ["pdf"]})
    rt = make(tmp_path)
    out, _ = await run(rt, q("--help me with a pdf"), catalog)
    await rt.aclose()
    assert out.invoked == ["pdf"]
    assert log_lines(log)[0]["prompt"] == "--help me with a pdf"


def test_missing_program_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="SKILLREACH_CLAUDE_PATH"):
        ClaudeCodeRuntime(claude_path=str(tmp_path / "nope" / "claude"), settings=Settings())


async def test_a_skill_name_that_cannot_be_a_folder_stops_before_any_agent_runs(tmp_path: Path) -> None:
    log = tmp_path / "stub.log"
    cat = Catalog(id="bad", skills=(Skill(name="../escape", description="d", body="b"),))
    rt = make(tmp_path)
    with pytest.raises(ConfigError, match="cannot be folder names"):
        await run(rt, q(expected="../escape"), cat)
    await rt.aclose()
    assert not log.exists()


async def test_compliance_step_budget_counts_turns(tmp_path: Path, catalog: Catalog, stub_env: Any) -> None:
    steps = [{"tool": "Bash", "input": {"command": f"echo {i}"}} for i in range(10)]
    stub_env({"*": {"steps": ["pdf", *steps], "sleep_after_skill": {}}})
    rt = make(tmp_path)
    out, _ = await run(rt, q(), catalog, compliance=True, step_budget=3)
    await rt.aclose()
    assert out.invoked == ["pdf"]
    assert [c.input["command"] for c in out.tool_calls] == ["echo 0", "echo 1", "echo 2"]


def test_no_credentials_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(ConfigError, match="isolated config folder"):
        ClaudeCodeRuntime(claude_path=str(STUB), settings=Settings())


async def test_the_key_never_reaches_an_error_message(
    tmp_path: Path, catalog: Catalog, stub_env: Any
) -> None:
    stub_env({"*": {"api_error": "API Error: 401 invalid x-api-key sk-test-secret"}})
    rt = make(tmp_path)
    out, _ = await run(rt, q(), catalog)
    await rt.aclose()
    assert out.error is not None
    assert "sk-test-secret" not in out.error
    assert "***" in out.error
