"""Each agent's listing of a catalog (``skillreach.skills.agent_listing``): Codex's capped listing, from
the cases of its own ``render.rs`` tests and the request Codex 0.171.0 really sent (the capture in
``../shared/design/agent-clis/``), and ``skillreach listing``. The same listing against the real CLI on
the real corpora is ``tests/test_runtime_realcli_codex.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.models import Skill
from skillreach.skills.agent_listing import (
    CLAUDE_CODE_HEADER,
    CODEX_DEFAULT_CHAR_BUDGET,
    claude_code_budget,
    claude_code_description,
    claude_code_listing,
    claude_code_listing_text,
    codex_budget,
    codex_listing,
    codex_listing_text,
    copilot_listing,
    copilot_listing_text,
    listing_for,
)

CAPTURES = Path(__file__).resolve().parents[2] / "shared" / "design" / "agent-clis"


def skill(name: str, description: str) -> Skill:
    return Skill(name=name, description=description)


def minimum(name: str) -> int:
    """Characters of a skill's line without description, its newline included."""
    return len(f"- {name}: (file: r0/{name}/SKILL.md)\n")


def test_the_budget_is_two_percent_of_the_window_else_8000_characters() -> None:
    assert codex_budget(200_000) == ("tokens", 4_000)
    assert codex_budget(99) == ("tokens", 1)
    assert codex_budget(None) == ("chars", CODEX_DEFAULT_CHAR_BUDGET)
    assert codex_budget(0) == ("chars", CODEX_DEFAULT_CHAR_BUDGET)


def test_a_catalog_that_fits_is_listed_in_full_sorted_by_name() -> None:
    listing = codex_listing([skill("b-skill", "Second."), skill("a-skill", "First.")])
    assert listing.lines == (
        "- a-skill: First. (file: r0/a-skill/SKILL.md)",
        "- b-skill: Second. (file: r0/b-skill/SKILL.md)",
    )
    assert not listing.overflows
    assert (
        listing.summary()
        == "codex lists all 2 skills in full (budget 8000 characters (no context window known))"
    )


def test_descriptions_are_shortened_evenly_before_any_skill_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """render.rs: ``budgeted_rendering_truncates_descriptions_equally_before_omitting_skills``."""
    alpha, beta = skill("alpha-skill", "abcdef"), skill("beta-skill", "uvwxyz")
    budget = minimum("alpha-skill") + minimum("beta-skill") + 6
    monkeypatch.setattr("skillreach.skills.agent_listing.CODEX_DEFAULT_CHAR_BUDGET", budget)
    listing = codex_listing([beta, alpha])
    assert listing.lines == (
        "- alpha-skill: ab (file: r0/alpha-skill/SKILL.md)",
        "- beta-skill: uv (file: r0/beta-skill/SKILL.md)",
    )
    assert listing.shortened == ["alpha-skill", "beta-skill"]
    assert listing.dropped == []


def test_what_a_short_description_leaves_goes_to_the_long_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """render.rs: ``budgeted_rendering_redistributes_unused_description_budget``."""
    short, long = skill("short-skill", "x"), skill("long-skill", "abcdefghi")
    budget = minimum("short-skill") + minimum("long-skill") + 11
    monkeypatch.setattr("skillreach.skills.agent_listing.CODEX_DEFAULT_CHAR_BUDGET", budget)
    listing = codex_listing([short, long])
    assert listing.lines == (
        "- long-skill: abcdefgh (file: r0/long-skill/SKILL.md)",
        "- short-skill: x (file: r0/short-skill/SKILL.md)",
    )
    assert listing.shortened == ["long-skill"]


def test_past_the_bare_lines_descriptions_go_and_skills_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    skills = [skill(f"s-{i}", "A description.") for i in range(4)]
    monkeypatch.setattr("skillreach.skills.agent_listing.CODEX_DEFAULT_CHAR_BUDGET", 2 * minimum("s-0") + 5)
    listing = codex_listing(skills)
    assert listing.lines == ("- s-0: (file: r0/s-0/SKILL.md)", "- s-1: (file: r0/s-1/SKILL.md)")
    assert listing.dropped == ["s-2", "s-3"]
    assert listing.shortened == ["s-0", "s-1"]
    assert "2 of 4 skills" in listing.summary()
    assert "a dropped skill can never be activated" in listing.summary()


def test_a_token_budget_counts_four_bytes_a_token_per_line() -> None:
    # 2 % of 1,500 = 30 tokens: two bare lines of 43 bytes (11 tokens each) fit, a third does not
    skills = [skill(f"skill-{i:03d}", "Does a thing.") for i in range(3)]
    listing = codex_listing(skills, context_window=1_500)
    assert [s.name for s in listing.skills if not s.dropped] == ["skill-000", "skill-001"]


def test_the_listing_is_the_block_codex_sent_in_the_capture() -> None:
    capture = CAPTURES / "codex-first-request.json"
    if not capture.is_file():
        pytest.skip("../shared/design/agent-clis is not present beside the checkout")
    body = json.loads(capture.read_text())["body"]
    sent = body["input"][1]["content"][0]["text"]
    skills = [
        skill(
            "pdf-report",
            "Build a one-page PDF report from a CSV file. "
            "Use when the user asks for a PDF summary of tabular data.",
        ),
        skill(
            "git-changelog",
            "Write a CHANGELOG.md entry from recent git commits. "
            "Use when the user asks to update the changelog.",
        ),
    ]
    assert codex_listing_text(codex_listing(skills), "<workspace>/.agents/skills") == sent


def test_claude_code_lists_a_small_catalog_in_full() -> None:
    listing = listing_for("claude-code", [skill("b", "B."), skill("a", "A.")])
    assert listing.lines == ("- a: A.", "- b: B.")
    assert not listing.overflows
    assert claude_code_listing_text(listing) == f"{CLAUDE_CODE_HEADER}\n\n- a: A.\n- b: B."
    with pytest.raises(ValueError, match="unknown agent"):
        listing_for("nobody", [])


def test_claude_code_budget_is_one_percent_of_the_window_in_characters() -> None:
    assert claude_code_budget("claude-sonnet-4-6")[0] == 8_000  # 200,000 tokens x 4 characters
    assert claude_code_budget("claude-sonnet-4-6-20260115")[0] == 8_000
    assert claude_code_budget("claude-sonnet-4-6[1m]")[0] == 40_000
    assert claude_code_budget("claude-future-9")[0] == 30_000  # unknown: 1,000,000 tokens x 3
    assert claude_code_budget(None)[0] == 8_000
    assert claude_code_budget("claude-haiku-4-5", 100_000)[0] == 4_000


def test_claude_code_takes_descriptions_away_and_gives_back_those_that_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over the budget every description goes; then in name order each one that still fits comes back
    (a long one is skipped and a later short one still gets in); no skill is dropped."""
    skills = [skill("a-long", "x" * 50), skill("b-short", "y" * 10), skill("c-mid", "z" * 30)]
    bare = len("- a-long") + len("- b-short") + len("- c-mid") + 2
    monkeypatch.setattr("skillreach.skills.agent_listing.CLAUDE_CODE_BUDGET_PERCENT", 1)
    # room for b-short's ": " + 10 and c-mid's ": " + 30, not for a-long's 52
    window = (bare + 12 + 32) * 100 // 4
    listing = claude_code_listing(skills, model="claude-sonnet-4-6", context_window=window)
    assert listing.lines == ("- a-long", f"- b-short: {'y' * 10}", f"- c-mid: {'z' * 30}")
    assert listing.name_only == ["a-long"]
    assert listing.dropped == []
    assert listing.summary().startswith("claude-code lists all 3 skills, 1 of them by name alone")
    tighter = claude_code_listing(skills, model="claude-sonnet-4-6", context_window=window - 25)
    assert tighter.lines == ("- a-long", f"- b-short: {'y' * 10}", "- c-mid")


def test_claude_code_cleans_caps_and_measures_descriptions_as_the_cli_does() -> None:
    when = Skill(name="w", description="Does w.", frontmatter={"when_to_use": "When\tw is asked"})
    assert claude_code_description(when) == "Does w. - When w is asked"
    messy = skill("m", "a \n b\r\n\u200bc <tag> & `x`\t")
    assert claude_code_description(messy) == "a   b c &lt;tag&gt; & `x`"
    assert claude_code_description(skill("n", "a\u00a0b")) == "a\u00a0b"  # a no-break space stays
    long = claude_code_description(skill("l", "w" * 2000))
    assert long == "w" * 1535 + "\u2026"
    hidden = Skill(name="h", description="H.", frontmatter={"disable-model-invocation": True})
    assert [s.name for s in claude_code_listing([hidden, skill("v", "V.")]).skills] == ["v"]


def test_claude_code_counts_a_wide_character_twice() -> None:
    """Six CJK characters are twelve columns: counted as six, ``a-wide`` would fit and ``b-narrow`` not."""
    wide, narrow = skill("a-wide", "漢字テキスト"), skill("b-narrow", "x" * 6)
    fits = len("- a-wide") + len("- b-narrow: ") + 6 + 1
    listing = claude_code_listing([wide, narrow], model="claude-sonnet-4-6", context_window=fits * 25)
    assert listing.lines == ("- a-wide", "- b-narrow: xxxxxx")


def test_listing_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(30):
        folder = tmp_path / f"skill-{i:02d}"
        folder.mkdir()
        text = f"Handle chores of kind {i:02d} for the team, with a long explanation of when to use it. " * 3
        (folder / "SKILL.md").write_text(
            f"---\nname: skill-{i:02d}\ndescription: {text.strip()}\n---\nBody.\n"
        )
    assert main(["listing", str(tmp_path), "--agent", "codex", "--context-window", "100000"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("codex lists 30 of 30 skills: 30 descriptions shortened, 0 skills dropped")
    assert "  skill-00  " in out
    assert main(["listing", str(tmp_path), "--context-window", "10000", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    statuses = {s["status"] for s in payload["skills"]}
    assert statuses == {"shortened", "dropped"}
    assert payload["budget"].startswith("200 tokens")
    assert main(["listing", str(tmp_path), "--full"]) == 0
    full = capsys.readouterr().out
    assert full.startswith("<skills_instructions>\n## Skills\n")
    assert "- `r0` = `<workspace>/.agents/skills`" in full
    assert main(["listing", str(tmp_path), "--context-window", "-1"]) == 2


@pytest.mark.parametrize("agent", ["gemini-cli", "opencode"])
def test_the_agents_with_a_skill_tool_list_the_catalog_as_it_is(
    agent: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long = "Handle the chores of the team, with a long explanation of when to use it. " * 40
    for name in ("b-skill", "a-skill"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {long.strip()}\n---\nBody.\n"
        )
    assert main(["listing", str(tmp_path), "--agent", agent, "--context-window", "1000"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{agent} lists all 2 skills in full (budget none)\n")
    assert "no budget, no truncation" in out
    assert "shortened" not in out
    assert "dropped" not in out
    assert main(["listing", str(tmp_path), "--agent", agent, "--full"]) == 0
    assert capsys.readouterr().out == f"- a-skill: {long.strip()}\n- b-skill: {long.strip()}\n"


def test_listing_command_for_claude_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(40):
        folder = tmp_path / f"skill-{i:02d}"
        folder.mkdir()
        text = f"Handle chores of kind {i:02d} for the team, with a long explanation of when to use it. " * 3
        (folder / "SKILL.md").write_text(f"---\nname: skill-{i:02d}\ndescription: {text.strip()}\n---\nB.\n")
    assert main(["listing", str(tmp_path), "--agent", "claude-code"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("claude-code lists all 40 skills, 10 of them by name alone")
    assert "budget 8000 characters" in out
    assert "\nby name alone (10): the model sees the name, never the description\n  skill-30  (" in out
    assert main(["listing", str(tmp_path), "--agent", "claude-code", "--model", "claude-opus-4-6[1m]"]) == 0
    assert capsys.readouterr().out.startswith("claude-code lists all 40 skills in full (budget 40000")
    assert main(["listing", str(tmp_path), "--agent", "claude-code", "--full"]) == 0
    full = capsys.readouterr().out
    assert full.startswith(f"{CLAUDE_CODE_HEADER}\n\n- skill-00: Handle chores")
    assert full.endswith("\n- skill-39\n")
    assert main(["listing", str(tmp_path), "--agent", "opencode", "--model", "x"]) == 2


def test_copilot_lists_what_it_accepts_xml_escaped_as_in_the_capture() -> None:
    """The entries of the request Copilot CLI 1.0.102 sent, byte for byte (its built-in skills follow
    them), and the rules read off its requests: escaped descriptions (``github&apos;s``), names and
    descriptions it refuses dropped."""
    import re

    capture = CAPTURES / "copilot-first-request.json"
    if not capture.is_file():
        pytest.skip("../shared/design/agent-clis is not present beside the checkout")
    system = next(
        m["content"] for m in json.loads(capture.read_text())["body"]["messages"] if m["role"] == "system"
    )
    entry = (
        r"<skill>\n  <name>[^<]*</name>\n  <description>.*?</description>\n"
        r"  <location>project</location>\n</skill>"
    )
    sent = re.findall(entry, system, flags=re.S)
    assert len(sent) == 2
    skills = [
        skill(
            "pdf-report",
            "Build a one-page PDF report from a CSV file. "
            "Use when the user asks for a PDF summary of tabular data.",
        ),
        skill(
            "git-changelog",
            "Write a CHANGELOG.md entry from recent git commits. "
            "Use when the user asks to update the changelog.",
        ),
    ]
    assert copilot_listing_text(copilot_listing(skills)) == "\n".join(sent)
    odd = [
        skill("apos", 'The service\'s <health> & "status"\n'),
        skill("under_score", "a name it refuses"),
        skill("x" * 65, "too long a name"),
        skill("long", "y" * 1025),
        skill("wide", "\U0001f600" * 513),  # 1,026 UTF-16 units
        skill("ok-" + "z" * 61, "z" * 1024),
    ]
    listing = copilot_listing(odd)
    assert listing.dropped == ["long", "under_score", "wide", "x" * 65]
    assert [s.name for s in listing.skills if not s.dropped] == ["apos", "ok-" + "z" * 61]
    assert listing.lines[0] == (
        "<skill>\n  <name>apos</name>\n  <description>"
        "The service&apos;s &lt;health&gt; &amp; &quot;status&quot;\n"
        "</description>\n  <location>project</location>\n</skill>"
    )
    assert listing.skills[0].description == "The service&apos;s &lt;health&gt; &amp; &quot;status&quot;\n"
    assert "4 skills dropped" in listing.summary()
