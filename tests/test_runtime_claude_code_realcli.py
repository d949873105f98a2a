"""The claude-code runtime with the REAL Claude Code CLI against the Messages API stand-in.

Opt-in by availability: the binary comes from ``SKILLREACH_REAL_CLAUDE`` or the cache folder that
``.ci/run`` installs into (``~/.cache/skillreach/claude-code``, npm package
``@anthropic-ai/claude-code``). Without it the tests are reported as skipped, never as passed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillreach.models import Catalog, Query, Skill
from skillreach.runtimes.claude_code import ClaudeCodeRuntime
from skillreach.settings import Settings
from skillreach.study.contract import ProbeOptions, Tracker
from tests.fakes.messages_api import MessagesAPI, ScriptResponder, request_text
from tests.helpers.clis import Orphans, hold_hooks_left, real_claude

pytestmark = pytest.mark.realcli


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


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
    with MessagesAPI(script) as api, Orphans() as orphans:
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
        hooks_left = hold_hooks_left(orphans)
    assert out.error is None, out.error
    assert out.invoked == ["deploy", "rollback"]
    assert out.early_exit
    # the whole group is gone: the CLI and the hook that parked the target's call
    assert not any(alive(pid) for pid in rt.pids)
    assert hooks_left == []
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


def _texts(obj: object) -> list[str]:
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _texts(v)]
    if isinstance(obj, list):
        return [t for v in obj for t in _texts(v)]
    return [obj] if isinstance(obj, str) else []


def sent_listing(body: dict[str, object]) -> str:
    """The skills listing block of a request Claude Code sent: its header, a blank line, the lines."""
    from skillreach.skills.agent_listing import CLAUDE_CODE_HEADER

    found = [t[t.index(CLAUDE_CODE_HEADER) :] for t in _texts(body) if CLAUDE_CODE_HEADER in t]
    assert len(found) == 1, f"{len(found)} listing blocks in the request"
    head, lines = found[0].split("\n\n")[:2]
    return f"{head}\n\n{lines.removesuffix(chr(10) + '</system-reminder>')}"


def edge_skills(root: Path) -> Path:
    """Descriptions that test each part of the rule: wide characters and emoji (columns), control and
    format characters, ``<``/``>``, ``when_to_use``, over 1,536 characters, a hidden skill, and enough
    filler to pass the budget."""
    cases = {
        "alpha-cjk": "日本語の説明です。" + "漢字テキスト" * 60,
        "beta-emoji": "Emoji 🚀🎉 heavy " + "😀 rocket " * 80,
        "gamma-long": "Long words for testing the cap. " * 70,
        "eps-messy": "Folded\n\nline \t two\u200b <tag> & `tick`\u2028end\x07.  ",
        "nbsp-kept": "a\u00a0b and a\u3000c",
    }
    for name, description in cases.items():
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\nBody.\n", encoding="utf-8"
        )
    (root / "delta-when").mkdir()
    (root / "delta-when" / "SKILL.md").write_text(
        "---\nname: delta-when\ndescription: Does delta things.\nwhen_to_use: When the user asks for delta\n"
        "---\nBody.\n"
    )
    (root / "zeta-hidden").mkdir()
    (root / "zeta-hidden" / "SKILL.md").write_text(
        "---\nname: zeta-hidden\ndescription: Hidden.\ndisable-model-invocation: true\n---\nBody.\n"
    )
    for i in range(40):
        (root / f"filler-{i:02d}").mkdir()
        (root / f"filler-{i:02d}" / "SKILL.md").write_text(
            f"---\nname: filler-{i:02d}\ndescription: Filler skill {i} {'words and more words ' * 12}\n"
            "---\nB.\n"
        )
    return root


@pytest.mark.parametrize(
    ("model", "source", "name_only"),
    [
        ("claude-sonnet-4-6", "corpora", 245),  # 8,000 characters: 200,000 tokens at 4 a token
        ("claude-future-9", "corpora", 206),  # a model Claude Code has no figures for: 30,000
        ("claude-sonnet-4-6", "edge", 17),
    ],
)
async def test_claude_code_listing_is_what_claude_code_sends(
    claude: str, model: str, source: str, name_only: int, tmp_path: Path
) -> None:
    """``skillreach listing --agent claude-code`` predicts, byte for byte, the listing the real CLI sent:
    on the 252 real skills of ``../shared/corpora`` (two budgets) and on descriptions made to test each
    part of the rule."""
    from skillreach.skills.agent_listing import claude_code_listing, claude_code_listing_text
    from skillreach.skills.discovery import discover
    from tests.conftest import CORPORA
    from tests.fakes.messages_api import DEFAULT_ALIASES

    if source == "corpora" and not CORPORA.is_dir():
        pytest.skip("../shared/corpora is not present beside the checkout")
    folder = CORPORA if source == "corpora" else edge_skills(tmp_path / "edge")
    skills = discover([folder]).skills
    catalog = Catalog(id=source, skills=tuple(skills))
    aliases = {**DEFAULT_ALIASES, model: f"{model}-20260101"}
    with MessagesAPI(ScriptResponder({}), aliases=aliases) as api:
        rt = ClaudeCodeRuntime(
            model, claude_path=claude, settings=Settings(), base_url=api.base_url, api_key="k"
        )
        query = Query(id="l1", text="hello there", expected_skill=None, kind="out_of_scope")
        out = await rt.select(query, catalog, Tracker.for_query(query, ProbeOptions(timeout_s=120)))
        await rt.aclose()
    assert out.error is None, out.error
    predicted = claude_code_listing(skills, model=model)
    assert sent_listing(api.requests[0]) == claude_code_listing_text(predicted)
    assert len(predicted.name_only) == name_only
    assert predicted.dropped == []
    assert rt.listing_warning(catalog) == (
        f"catalog {source!r} overflows Claude Code's skills listing: {predicted.summary()}"
    )
