"""The opencode runtime with the REAL OpenCode (``opencode-ai`` 1.18.33) against the local Chat Completions
stand-in, streaming (``tests/fakes/openai_chat.py``): one probe's activation through the native ``skill``
tool, early exit and isolation, and the study through ``skillreach run --runtime opencode`` at concurrency
4, killed half-way and resumed.

Skipped, never passed, when the CLI is not installed (``SKILLREACH_REAL_OPENCODE`` or the cache folder
``.ci/run`` installs into, ``~/.cache/skillreach/opencode``) or ripgrep is not on PATH (OpenCode's skill
tool needs it offline).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from skillreach.settings import Settings
from tests.fakes.kit import folder_catalog, probe, query
from tests.fakes.openai_chat import OpenAIChat, completion, first_user_text, tool_call
from tests.helpers.cli_study import killed_half_way_and_resumed, reads_for
from tests.helpers.clis import real_opencode

pytestmark = pytest.mark.realcli


@pytest.fixture
def opencode() -> str:
    path = real_opencode()
    if path is None:
        pytest.skip("the real OpenCode CLI is not installed (set SKILLREACH_REAL_OPENCODE or run .ci/run)")
    if shutil.which("rg") is None:
        pytest.skip("ripgrep (rg) is not on PATH: OpenCode's skill tool cannot run offline without it")
    return path


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def system_of(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in body["messages"] if m.get("role") == "system")


async def test_real_opencode_loads_a_skill_and_exits_early(opencode: str, tmp_path: Path) -> None:
    from skillreach.runtimes.opencode import OpenCodeRuntime

    catalog = folder_catalog(tmp_path)
    plan = {"rotate the keys": ["pdf", "secrets", "rollback"], "weather": []}
    with OpenAIChat(plan=plan, skill_tool="skill", skill_arg="name", require_key="k-test") as api:
        rt = OpenCodeRuntime(
            "fake-model", opencode_path=opencode, settings=Settings(), base_url=api.base_url, api_key="k-test"
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
    assert none.usage.input_tokens > 0
    first = api.requests[0]
    assert first["stream"] is True
    assert "please rotate the keys now" in first_user_text(first)  # no title request first
    assert "skill" in [t["function"]["name"] for t in first["tools"]]
    system = system_of(first)
    listed = sorted(s for s in catalog.names if f"<name>{s}</name>" in system)
    assert listed == sorted(catalog.names)
    assert system.count("<skill>") == 3  # the catalog and nothing else (customize-opencode denied)
    assert "PDF BODY" not in json.dumps(first)


def test_real_opencode_through_skillreach_run_killed_half_way_and_resumed(
    opencode: str, tmp_path: Path
) -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        reads = reads_for(first_user_text(body))
        done = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if done < len(reads):
            return completion(model="fake-model", tool_calls=[tool_call("skill", {"name": reads[done]})])
        return completion(model="fake-model", text="Done.")

    with OpenAIChat(responder=responder) as api:
        line = killed_half_way_and_resumed(
            "opencode",
            {"opencode_path": opencode, "base_url": api.base_url},
            {"OPENAI_API_KEY": "k-test-not-a-secret"},
            tmp_path,
            "1.18.33",
        )
    print("\n" + line)
