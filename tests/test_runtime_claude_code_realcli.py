"""The claude-code runtime with the REAL Claude Code CLI against the Messages API stand-in.

Opt-in by availability: the binary comes from ``SKILLREACH_REAL_CLAUDE`` or the cache folder that
``.ci/run`` installs into (``~/.cache/skillreach/claude-code``, npm package
``@anthropic-ai/claude-code``). Without it the tests are reported as skipped, never as passed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from skillreach.models import Catalog, Query, Skill
from skillreach.runtimes.claude_code import ClaudeCodeRuntime
from skillreach.settings import Settings
from skillreach.study.contract import ProbeOptions, Tracker
from tests.fakes.messages_api import MessagesAPI, ScriptResponder, request_text
from tests.helpers.clis import real_claude

pytestmark = pytest.mark.realcli



def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def hold_hooks_left() -> list[str]:
    left = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        mine = sys.executable in cmd  # the machine may be shared: only hooks this interpreter started
        if mine and "time.sleep(" in cmd and "rollback" in cmd and alive(int(proc.name)):
            left.append(cmd)
    return left


@pytest.fixture
def claude() -> str:
    path = real_claude()
    if path is None:
        pytest.skip("the real Claude Code CLI is not installed (set SKILLREACH_REAL_CLAUDE or run .ci/run)")
    return path


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    skills = []
    for name, desc in (
        ("rollback", "Roll a deployment back to the previous release."),
        ("deploy", "Deploy the current branch to staging or production."),
        ("changelog", "Write the changelog entry for a release."),
    ):
        folder = tmp_path / name
        folder.mkdir()
        body = f"# {name}\nSECRET-BODY-{name.upper()}\n"
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\n{body}")
        skills.append(
            Skill(name=name, description=desc, body=body, path=str(folder / "SKILL.md"), folder=str(folder))
        )
    return Catalog(id="real", skills=tuple(skills))


async def test_real_cli_early_exit_disclosure_and_residency(claude: str, catalog: Catalog) -> None:
    script = ScriptResponder({"undo the release": ["deploy", "rollback", "changelog"]})
    with MessagesAPI(script) as api:
        rt = ClaudeCodeRuntime(
            "claude-sonnet-4-6",
            claude_path=claude,
            settings=Settings(),
            base_url=api.base_url,
            api_key="sk-test",
        )
        query = Query(id="r1", text="please undo the release from this morning", expected_skill="rollback")
        tracker = Tracker.for_query(query, ProbeOptions(max_turns=3, timeout_s=90))
        out = await rt.select(query, catalog, tracker)
        await rt.aclose()
    assert out.error is None, out.error
    assert out.invoked == ["deploy", "rollback"]
    assert out.early_exit
    # the whole group is gone: the CLI and the hook that parked the target's call
    assert not any(alive(pid) for pid in rt.pids)
    assert not hold_hooks_left()
    assert rt.non_catalog_residents <= {"doctor", "plugin-authoring"}
    assert out.resolved_model == "claude-sonnet-4-6-20260115"
    skill_requests = [b for b in api.requests if any(t.get("name") == "Skill" for t in b.get("tools") or [])]
    assert len(skill_requests) == 2  # no request after the target was invoked
    first, second = (request_text(b) for b in skill_requests)
    for name in ("ROLLBACK", "DEPLOY", "CHANGELOG"):
        assert f"SECRET-BODY-{name}" not in first
    assert "SECRET-BODY-DEPLOY" in second
    assert "SECRET-BODY-ROLLBACK" not in second
    # the listing reached the model: every name and description is in the first request
    for skill in catalog.skills:
        assert skill.description in first


async def test_real_cli_out_of_scope_query_invokes_nothing(claude: str, catalog: Catalog) -> None:
    with MessagesAPI(ScriptResponder({"weather": [{"text": "It is sunny."}]})) as api:
        rt = ClaudeCodeRuntime(
            claude_path=claude, settings=Settings(), base_url=api.base_url, api_key="sk-test"
        )
        query = Query(id="r2", text="what is the weather like", expected_skill=None, kind="out_of_scope")
        tracker = Tracker.for_query(query, ProbeOptions(timeout_s=90))
        out = await rt.select(query, catalog, tracker)
        await rt.aclose()
    assert out.error is None, out.error
    assert out.invoked == []
    assert out.turns >= 1
    assert json.dumps(api.requests).count("SECRET-BODY") == 0


async def test_real_cli_compliance_records_tool_calls_without_running_them(
    claude: str, catalog: Catalog, tmp_path: Path
) -> None:
    target = tmp_path / "should-not-exist"
    script = ScriptResponder(
        {
            "ship the release": [
                "deploy",
                {"tool": "Bash", "input": {"command": f"touch {target}", "description": "make a file"}},
                {"text": "Deployed."},
            ]
        }
    )
    with MessagesAPI(script) as api:
        rt = ClaudeCodeRuntime(
            claude_path=claude, settings=Settings(), base_url=api.base_url, api_key="sk-test"
        )
        query = Query(id="r3", text="ship the release to staging", expected_skill="deploy")
        tracker = Tracker.for_query(query, ProbeOptions(compliance=True, early_exit=False, timeout_s=90))
        out = await rt.select(query, catalog, tracker)
        await rt.aclose()
    assert out.error is None, out.error
    assert out.invoked == ["deploy"]
    assert [c.tool for c in out.tool_calls] == ["Bash"]
    assert out.tool_calls[0].input["command"] == f"touch {target}"
    assert out.final_text == "Deployed."
    assert not target.exists()  # refused by the CLI: no permission was granted
