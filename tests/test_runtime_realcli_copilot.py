"""The copilot runtime with the REAL Copilot CLI (``@github/copilot`` 1.0.102), in its BYOK offline mode,
against the local Chat Completions stand-in, streaming: one probe's activation through the native ``skill``
tool, early exit, isolation and the built-in skills reported, and the study through ``skillreach run
--runtime copilot`` at concurrency 4, killed half-way and resumed.

Skipped, never passed, when the CLI is not installed: ``SKILLREACH_REAL_COPILOT`` or the cache folder
``.ci/run`` installs into (``~/.cache/skillreach/copilot``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillreach.settings import Settings
from tests.fakes.kit import folder_catalog, probe, query
from tests.fakes.openai_chat import OpenAIChat, completion, first_user_text, tool_call
from tests.helpers.cli_study import killed_half_way_and_resumed, reads_for
from tests.helpers.clis import real_copilot

pytestmark = pytest.mark.realcli


@pytest.fixture
def copilot() -> str:
    path = real_copilot()
    if path is None:
        pytest.skip("the real Copilot CLI is not installed (set SKILLREACH_REAL_COPILOT or run .ci/run)")
    return path


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def user_text(body: dict[str, Any]) -> str:
    """The query: Copilot puts ``<current_datetime>…`` before it in the first user message."""
    return first_user_text(body).rsplit("\n", 1)[-1]


async def test_real_copilot_loads_a_skill_and_exits_early(copilot: str, tmp_path: Path) -> None:
    from skillreach.runtimes.copilot import BUILTIN_SKILLS, CopilotRuntime

    catalog = folder_catalog(tmp_path)
    plan = {"rotate the keys": ["pdf", "secrets", "rollback"], "weather": []}
    with OpenAIChat(plan=plan, skill_tool="skill", skill_arg="skill", require_key="k-test") as api:
        rt = CopilotRuntime(
            "fake-model", copilot_path=copilot, settings=Settings(), base_url=api.base_url, api_key="k-test"
        )
        out, _ = await probe(rt, catalog, query("please rotate the keys now", "secrets"), timeout_s=120)
        none, _ = await probe(rt, catalog, query("what is the weather", None), timeout_s=120)
        await rt.aclose()
    assert out.error is None, out.error
    assert out.invoked == ["pdf", "secrets"]
    assert out.early_exit
    assert not any(alive(pid) for pid in rt.pids)
    assert none.error is None, none.error
    assert none.invoked == []
    assert none.final_text == "Done."
    assert rt.builtin == set(BUILTIN_SKILLS)  # counted and reported, never scored
    first = api.requests[0]
    assert first["stream"] is True
    assert user_text(first) == "please rotate the keys now"
    assert "skill" in [t["function"]["name"] for t in first["tools"]]
    system = "\n".join(str(m.get("content")) for m in first["messages"] if m.get("role") == "system")
    for name in catalog.names:
        assert f"<name>{name}</name>" in system
    assert "PDF BODY" not in json.dumps(first)


def test_real_copilot_through_skillreach_run_killed_half_way_and_resumed(
    copilot: str, tmp_path: Path
) -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        reads = reads_for(user_text(body))
        done = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if done < len(reads):
            return completion(model="fake-model", tool_calls=[tool_call("skill", {"skill": reads[done]})])
        return completion(model="fake-model", text="Done.")

    with OpenAIChat(responder=responder) as api:
        line = killed_half_way_and_resumed(
            "copilot",
            {"copilot_path": copilot, "base_url": api.base_url},
            {"OPENAI_API_KEY": "k-test-not-a-secret"},
            tmp_path,
            "GitHub Copilot CLI 1.0.102.",
            model="fake-model",  # BYOK needs an explicit model
        )
    print("\n" + line)
