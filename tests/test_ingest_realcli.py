"""``skillreach ingest`` of transcripts the REAL Claude Code CLI wrote (issue 32).

The CLI (``~/.cache/skillreach/claude-code``, or ``SKILLREACH_REAL_CLAUDE``) runs against the local
Messages API stand-in, in a project whose skills are committed to git, with a HOME and
``CLAUDE_CONFIG_DIR`` of the test's own and session persistence on; the stand-in makes it call the
``Skill`` tool twice. Then ``skillreach ingest`` reads the transcript folder the CLI wrote and the store
holds the prompt and both calls: skill name, session, success, and the skill's version then. Skipped,
never passed, without the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from runtimes.claude_code import CLI_SETTINGS, ISOLATION_ENV
from skillreach.cli import main
from skillreach.live import EventKind
from skillreach.store.database import Store
from skillreach.store.live import load_events
from tests.fakes.messages_api import MessagesAPI, ScriptResponder
from tests.helpers import hang
from tests.helpers.clis import real_claude

pytestmark = pytest.mark.realcli


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_transcripts_of_the_real_cli_are_ingested_with_their_skill_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    claude = real_claude()
    if claude is None:
        pytest.skip("the real Claude Code CLI is not installed (set SKILLREACH_REAL_CLAUDE or run .ci/run)")
    project = tmp_path / "project"
    skills = project / ".claude" / "skills"
    for name, desc in (
        ("rollback", "Roll a deployment back to the previous release."),
        ("deploy", "Deploy the current branch to staging or production."),
    ):
        (skills / name).mkdir(parents=True)
        (skills / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {desc}\n---\n# {name}\nSteps.\n"
        )
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "skills")
    home = tmp_path / "home"
    config = home / ".claude"
    config.mkdir(parents=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(config),
        "TMPDIR": str(tmp_path),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "CI": "1",
        "ANTHROPIC_API_KEY": "sk-test",
        **ISOLATION_ENV,
    }
    script = ScriptResponder({"undo the release": ["deploy", "rollback"]})
    with MessagesAPI(script) as api:
        env["ANTHROPIC_BASE_URL"] = api.base_url
        proc = hang.finish(
            [
                claude,
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--max-turns",
                "5",
                "--setting-sources",
                "project",
                "--settings",
                json.dumps(CLI_SETTINGS),
                "--tools",
                "Skill",
                "--strict-mcp-config",
                "--model",
                "claude-sonnet-4-6",
                "--",
                "please undo the release from this morning",
            ],
            limit_s=180,
            cwd=project,
            env=env,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    stream = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    session = next(m["session_id"] for m in stream if m.get("type") == "system")
    transcripts = list((config / "projects").rglob("*.jsonl"))
    assert transcripts, f"the CLI wrote no transcript under {config / 'projects'}"

    monkeypatch.setenv("SKILLREACH_HOME", str(tmp_path / "sr"))
    assert main(["ingest", str(config / "projects"), "--skills", str(skills), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["skipped"] == 0, summary
    with Store(f"sqlite:///{tmp_path / 'sr' / 'skillreach.db'}") as store:
        events = load_events(store, include_sidechain=True)
    prompts = [e for e in events if e.kind == EventKind.PROMPT]
    calls = [e for e in events if e.kind == EventKind.SKILL]
    assert [p.session_id for p in prompts] == [session]
    assert [(c.skill, c.skill_ran, c.success, c.session_id) for c in calls] == [
        ("deploy", "deploy", True, session),
        ("rollback", "rollback", True, session),
    ]
    for c in calls:
        assert c.cwd is not None
        assert Path(c.cwd).resolve() == project.resolve()
        assert c.git_branch == "main"
        assert c.model
        assert c.model.startswith("claude-sonnet-4-6")
        assert c.skill_version == "git:" + _git(project, "rev-parse", f"HEAD:.claude/skills/{c.skill}")
        assert c.skill_dir is not None
        assert Path(c.skill_dir).resolve() == (skills / str(c.skill)).resolve()
        assert c.prompt_id is not None
        assert c.prompt_id == prompts[0].prompt_id
    # a second run adds nothing and reads nothing
    assert main(["ingest", str(config / "projects"), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["events_added"], again["bytes_read"]) == (0, 0)
