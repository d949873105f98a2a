"""The gemini-cli runtime with the REAL Gemini CLI (``@google/gemini-cli`` 0.61.0) against the local Gemini
API stand-in (``tests/fakes/gemini_api.py``): one probe's activation, early exit and isolation, and the
study through ``skillreach run --runtime gemini-cli`` at concurrency 4, killed half-way and resumed.

Skipped, never passed, when the CLI is not installed: ``SKILLREACH_REAL_GEMINI`` or the cache folder that
``.ci/run`` installs into (``~/.cache/skillreach/gemini-cli``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skillreach.settings import Settings
from tests.fakes.gemini_api import GeminiCliAPI, declared_tools, query_of, skill_listing
from tests.fakes.kit import folder_catalog, probe, query
from tests.helpers.cli_study import killed_half_way_and_resumed, reads_for
from tests.helpers.clis import real_gemini

pytestmark = pytest.mark.realcli


@pytest.fixture
def gemini() -> str:
    path = real_gemini()
    if path is None:
        pytest.skip("the real Gemini CLI is not installed (set SKILLREACH_REAL_GEMINI or run .ci/run)")
    return path


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


async def test_real_gemini_activates_a_skill_and_exits_early(gemini: str, tmp_path: Path) -> None:
    from skillreach.runtimes.gemini_cli import GeminiCliRuntime

    catalog = folder_catalog(tmp_path)
    script = {"rotate the keys": ["pdf", "secrets", "rollback"], "weather": []}
    with GeminiCliAPI(script) as api:
        rt = GeminiCliRuntime(
            "fake-model", gemini_path=gemini, settings=Settings(), base_url=api.base_url, api_key="k-test"
        )
        out, _ = await probe(rt, catalog, query("please rotate the keys now", "secrets"), timeout_s=90)
        none, _ = await probe(rt, catalog, query("what is the weather", None), timeout_s=90)
        await rt.aclose()
    assert out.error is None, out.error
    assert out.invoked == ["pdf", "secrets"]
    assert out.early_exit
    assert len(api.requests) <= 4  # ended at the target's activation: never the third skill
    assert not any(alive(pid) for pid in rt.pids)
    assert none.error is None, none.error
    assert none.invoked == []
    assert none.final_text == "Done."
    assert none.usage.input_tokens > 0
    assert set(api.keys) == {"k-test"}
    first = api.requests[0]
    assert query_of(first) == "please rotate the keys now"
    assert "activate_skill" in declared_tools(first)  # the policy file kept it
    assert sorted(skill_listing(first)) == sorted((s.name, s.description) for s in catalog.skills)


def test_real_gemini_through_skillreach_run_killed_half_way_and_resumed(gemini: str, tmp_path: Path) -> None:
    def script(body: dict[str, Any]) -> list[Any]:
        return list(reads_for(query_of(body)))

    with GeminiCliAPI(script) as api:
        line = killed_half_way_and_resumed(
            "gemini-cli",
            {"gemini_path": gemini, "base_url": api.base_url},
            {"GEMINI_API_KEY": "k-test-not-a-secret"},
            tmp_path,
            "0.61.0",
        )
    print("\n" + line)
