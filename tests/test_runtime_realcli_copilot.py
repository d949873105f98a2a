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

from skillreach._io.console import escape
from skillreach.settings import Settings
from tests.fakes.kit import folder_catalog, probe, query
from tests.fakes.openai_chat import OpenAIChat, completion, first_user_text, tool_call
from tests.helpers import hang
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


# ------------------------------------------------------------------------------- the listing

TRICKY = {
    "apos": 'description: Check the service\'s health & <b>status</b> "now" > then',
    "folded": "description: >\n  A folded description\n  over two lines, with 'quotes'.\n",
    "literal": "description: |\n  Line one\n  Line two\twith a tab\n",
    "unicode": 'description: "Café – naïve résumé ✓ 😀 \\u00a0nbsp"',
    "spaces": "description: '   leading and trailing spaces   '",
    "control": 'description: "bell\\a and amp &amp; already"',
    "when": "description: Use it.\nwhen_to_use: When asked.",
    "long": "description: " + ("word " * 300).strip(),
}


async def test_copilot_listing_is_what_the_real_copilot_sends_byte_for_byte(
    copilot: str, tmp_path: Path
) -> None:
    """``skillreach listing --agent copilot --full`` against the request the real Copilot CLI sent for the
    same skills: XML-escaped descriptions (``service&apos;s``), line breaks and spaces kept, sorted by
    name, the over-long description's skill left out."""
    import re

    from skillreach.models import Catalog
    from skillreach.runtimes.copilot import CopilotRuntime
    from skillreach.skills.discovery import discover
    from tests.helpers.cli_study import SKILLREACH

    root = tmp_path / "skills"
    for name, front in TRICKY.items():
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(f"---\nname: {name}\n{front}\n---\nBody of {name}.\n")
    catalog = Catalog(id="tricky", skills=tuple(discover([root]).skills))
    assert sorted(catalog.names) == sorted(TRICKY)
    with OpenAIChat() as api:
        rt = CopilotRuntime("fake-model", copilot_path=copilot, settings=Settings(), base_url=api.base_url,
                            api_key="zq-test-key-987654")  # fmt: skip
        out, _ = await probe(rt, catalog, query("hello", None), timeout_s=120)
        await rt.aclose()
    assert out.error is None, out.error
    system = "\n".join(
        str(m.get("content")) for m in api.requests[0]["messages"] if m.get("role") == "system"
    )
    sent = re.findall(
        r"<skill>\n  <name>[^<]*</name>\n  <description>.*?</description>\n  <location>project</location>\n"
        r"</skill>",
        system,
        flags=re.S,
    )
    shown = hang.finish(
        [str(SKILLREACH), "listing", str(root), "--agent", "copilot", "--full"],
        limit_s=120,
        check=True,
    )  # fmt: skip
    # what Copilot sent, as a terminal may show it: a control character (the BEL) as its visible escape
    assert shown.stdout == escape("\n".join(sent), lines=True) + "\n"
    assert "service&apos;s health &amp; &lt;b&gt;status&lt;/b&gt; &quot;now&quot; &gt; then" in shown.stdout
    assert "<name>long</name>" not in system  # Copilot leaves it out, and the listing says so
    summary = hang.finish(
        [str(SKILLREACH), "listing", str(root), "--agent", "copilot"],
        limit_s=120,
        check=True,
    )  # fmt: skip
    assert "dropped (1): not in the listing at all\n  long" in summary.stdout
