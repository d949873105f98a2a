"""``skillreach lint``, ``skillreach overlap`` and ``skillreach listing``."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from skillreach._io.console import make_console

__all__ = ["register"]


_FOLLOW_HELP = (
    "Follow symbolic links whose target lies outside the folders given (by default such a link is "
    "named and skipped)."
)


class LintFormat(StrEnum):
    text = "text"
    github = "github"


def lint_cmd(  # noqa: PLR0917 - a typer command: one parameter per option
    dirs: list[Path] = typer.Argument(..., metavar="DIR...", help="Folders (or SKILL.md files) to check."),
    output_format: LintFormat = typer.Option(
        LintFormat.text, "--format", help="text (grouped by file) or github (workflow annotations)."
    ),
    budget: int | None = typer.Option(
        None,
        "--budget",
        help="Warn when the catalog listing exceeds N characters (default: setting listing_budget_chars).",
    ),
    config: Path | None = typer.Option(None, "--config", help="Settings file (TOML or YAML)."),
    queries: Path | None = typer.Option(
        None,
        "--queries",
        help="A query set: warn for each skill with fewer positive cases than its gates can ever use.",
    ),
    follow_outside: bool = typer.Option(False, "--follow-outside", help=_FOLLOW_HELP),
    strict_budget: bool = typer.Option(
        False, "--strict-budget", help="A listing over the budget is an error (exit 1), not a warning."
    ),
) -> None:
    """Static checks of SKILL.md files. Exit 0 clean (warnings allowed), 1 errors, 2 unreadable input."""
    from skillreach.errors import InputError, LintFailed
    from skillreach.settings import load_settings
    from skillreach.skills.lint import format_github, format_text, lint

    if budget is not None and budget < 1:
        raise InputError(f"--budget must be a positive number of characters, not {budget}")
    settings = load_settings(config, listing_budget_chars=budget)
    report = lint(dirs, budget=settings.listing_budget_chars, follow_outside=follow_outside)
    if strict_budget:
        from dataclasses import replace

        report.findings = [
            replace(f, severity="error") if f.code == "listing-budget" else f for f in report.findings
        ]
    text = format_github(report) if output_format is LintFormat.github else format_text(report)
    typer.echo(text)
    if queries is not None:
        github = output_format is LintFormat.github
        for line in _too_few_cases(queries, settings.gates, dirs):
            shown = f"::warning title=skillreach%3A too few cases::{line}" if github else f"warning: {line}"
            typer.echo(shown)
    if report.exit_code:
        n = len(report.errors)
        files = len(report.files)
        raise LintFailed(f"lint found {n} error{'s' * (n != 1)} in {files} SKILL.md (listed above)")


def _too_few_cases(queries: Path, gates: Any, dirs: list[Path]) -> list[str]:
    """A line for each linted skill whose positive cases are too few for its activation gate to
    ever call a breach (smallest breach: none), with the number of cases that would."""
    from skillreach.baselines.gates import smallest_breach
    from skillreach.queries.sets import load_query_set

    counts: dict[str, int] = {}
    for q in load_query_set(queries).queries:
        if q.expected_skill:
            counts[q.expected_skill] = counts.get(q.expected_skill, 0) + 1
    from skillreach.skills.discovery import discover

    names = {s.name for s in discover(dirs).skills}
    gate = float(gates.activation)
    out = []
    none = sorted(n for n in names if not counts.get(n))
    if none:
        out.append(
            f"{len(none)} skill{'s' * (len(none) != 1)} without a positive case in {queries} cannot "
            f"be gated: {', '.join(none)}"
        )
    for name in sorted(n for n in names if counts.get(n)):
        k = counts[name]
        if smallest_breach("activation", gate, k) is not None:
            continue
        more = range(k + 1, 201)
        need = next((n for n in more if smallest_breach("activation", gate, n) is not None), None)
        out.append(
            f"{name}: {k} positive case{'s' * (k != 1)} in {queries}: its activation gate ({gate:+.2f}) can "
            "never call a breach" + (f"; it needs at least {need}" if need else "")
        )
    return out


def overlap_cmd(
    dirs: list[Path] = typer.Argument(..., metavar="DIR...", help="Folders holding skills."),
    top: int = typer.Option(3, "--top", help="Rivals to show per skill (≥ 1)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output on stdout alone."),
    follow_outside: bool = typer.Option(False, "--follow-outside", help=_FOLLOW_HELP),
) -> None:
    """Asymmetric BM25 rivals of every skill (its name + description as the query against the others).

    Skills are listed most-threatened first (highest rival score relative to the skill's self-score).
    """
    from rich.table import Table

    from skillreach.errors import InputError
    from skillreach.skills.bm25 import CAVEAT, rivals
    from skillreach.skills.discovery import load_skills

    if top < 1:
        raise InputError(f"--top must be at least 1, not {top}")

    def problem(line: str) -> None:
        print(line, file=sys.stderr)

    skills = load_skills(dirs, on_problem=problem, follow_outside=follow_outside)
    result = sorted(rivals(skills, top=top), key=lambda r: (-r.top_ratio, r.name))
    if as_json:
        payload = {
            "caveat": CAVEAT,
            "top": top,
            "skills": [
                {
                    "name": r.name,
                    "path": r.path,
                    "self_score": r.self_score,
                    "rivals": [{"name": v.name, "score": v.score, "ratio": v.ratio} for v in r.rivals],
                }
                for r in result
            ],
        }
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")
        return
    console = make_console()
    table = Table(title=f"BM25 rivals of {len(skills)} skills (top {top})", show_lines=False)
    table.add_column("skill", overflow="fold")
    table.add_column("self", justify="right")
    table.add_column("rival", overflow="fold")
    table.add_column("score", justify="right")
    table.add_column("ratio", justify="right")
    for r in result:
        if not r.rivals:
            table.add_row(r.name, f"{r.self_score:.2f}", "—", "", "", end_section=True)
            continue
        for i, v in enumerate(r.rivals):
            table.add_row(
                r.name if i == 0 else "",
                f"{r.self_score:.2f}" if i == 0 else "",
                v.name,
                f"{v.score:.2f}",
                f"{v.ratio:.2f}" if v.ratio is not None else "—",
                end_section=i == len(r.rivals) - 1,
            )
    console.print(table)
    console.print(f"[dim]ratio = rival score / self-score. {CAVEAT}[/dim]")


class Agent(StrEnum):
    codex = "codex"
    claude_code = "claude-code"
    gemini_cli = "gemini-cli"
    opencode = "opencode"
    copilot = "copilot"


def listing_cmd(  # noqa: PLR0917 - a typer command
    dirs: list[Path] = typer.Argument(..., metavar="DIR...", help="Folders holding skills."),
    agent: Agent = typer.Option(Agent.codex, "--agent", help="The agent whose listing to show."),
    context_window: int | None = typer.Option(
        None,
        "--context-window",
        help="The model's context window in tokens, as the agent knows it (codex: default 272000, what "
        "Codex 0.171.0 assumes for a model it has no metadata for; 0: no window known, 8000 characters; "
        "claude-code: default the model's own, 200000, 1000000 for a [1m] or unknown model).",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="claude-code: the model Claude Code runs (default claude-sonnet-4-6); it sets the window and "
        "the characters a token (4 for the Claude models Claude Code knows, 3 otherwise).",
    ),
    full: bool = typer.Option(False, "--full", help="Print the listing block exactly as the agent sends it."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output on stdout alone."),
) -> None:
    """The catalog as an agent will list it to its model: for Codex, whose listing is capped at 2 % of the
    context window, which descriptions are shortened (and to what) and which skills are dropped — a
    dropped skill can never be activated, whatever its description says; for Claude Code, whose listing
    is capped at 1 % of the context window, which skills are listed by name alone (their description
    never reaches the model). Gemini CLI and OpenCode list every skill as it is; Copilot CLI every skill
    it accepts, its description XML-escaped (``--full``: its entries byte for byte)."""
    from skillreach.errors import InputError
    from skillreach.skills.agent_listing import (
        CODEX_FALLBACK_CONTEXT_WINDOW,
        claude_code_listing_text,
        codex_listing_text,
        copilot_listing_text,
        listing_for,
    )
    from skillreach.skills.discovery import load_skills

    if context_window is not None and context_window < 0:
        raise InputError(f"--context-window must be 0 or a positive number of tokens, not {context_window}")
    if model is not None and agent is not Agent.claude_code:
        raise InputError(f"--model counts for --agent claude-code only, not {agent.value}")
    if agent is Agent.claude_code:
        window = context_window or None  # none given: the model's own
    else:
        window = CODEX_FALLBACK_CONTEXT_WINDOW if context_window is None else (context_window or None)

    from skillreach._io.console import escape, escape_json

    def problem(line: str) -> None:
        print(escape(line), file=sys.stderr)

    def say(text: str) -> None:  # names and descriptions come from the SKILL.md files
        typer.echo(escape(text, lines=True))

    skills = load_skills(dirs, on_problem=problem)
    listing = listing_for(agent.value, skills, context_window=window, model=model)
    if as_json:
        payload = {
            "agent": listing.agent,
            "budget": listing.budget,
            "summary": listing.summary(),
            "skills": [
                {
                    "name": s.name,
                    "status": "dropped" if s.dropped else "shortened" if s.shortened else "full",
                    "shown": None if s.dropped else s.description,
                    "kept_chars": 0 if s.dropped else len(s.description),
                    "full_chars": s.full_length,
                }
                for s in listing.skills
            ],
        }
        sys.stdout.write(escape_json(json.dumps(payload, ensure_ascii=False, indent=2)) + "\n")
        return
    if full:
        root = "<workspace>/.agents/skills"
        if agent is Agent.codex:
            say(codex_listing_text(listing, root))
        elif agent is Agent.claude_code:
            say(claude_code_listing_text(listing))
        elif agent is Agent.copilot:
            say(copilot_listing_text(listing))
        else:
            say("\n".join(listing.lines))
        return
    say(listing.summary())
    if agent in (Agent.gemini_cli, Agent.opencode):
        say(
            f"{agent.value} lists every skill with its whole description (no budget, no truncation): "
            "the catalog as it is"
        )
    elif agent is Agent.copilot:
        say(
            "copilot lists every skill it accepts with its whole description, XML-escaped (no budget, no "
            "truncation); it leaves out a skill whose name is not lowercase letters, digits and single "
            "hyphens (64 at most) or whose description is empty or over 1,024 characters"
        )
    bare = set(listing.name_only) if agent is Agent.claude_code else set()
    shortened = [s for s in listing.skills if s.shortened and s.name not in bare]
    dropped = [s for s in listing.skills if s.dropped]
    if bare:
        say(f"\nby name alone ({len(bare)}): the model sees the name, never the description")
        for s in listing.skills:
            if s.name in bare:
                say(f"  {escape(s.name)}  ({s.full_length} characters of description left out)")
    if shortened:
        say(
            f"\nshortened ({len(shortened)}): characters of the description kept, and what the model sees"
        )
        width = max(len(s.name) for s in shortened)
        for s in shortened:
            shown = json.dumps(s.description, ensure_ascii=False)
            say(f"  {escape(s.name):<{width}}  {len(s.description):>4}/{s.full_length:<4}  {escape(shown)}")
    if dropped:
        say(f"\ndropped ({len(dropped)}): not in the listing at all")
        for s in dropped:
            say(f"  {escape(s.name)}")


def register(app: typer.Typer) -> None:
    app.command("lint")(lint_cmd)
    app.command("overlap")(overlap_cmd)
    app.command("listing")(listing_cmd)
