"""``skillreach ingest [PATH …]``: what agents recorded in production, read into the store.

Claude Code transcripts and OpenTelemetry file exports (see :mod:`skillreach.live.ingest`); only what is
new since the last run is read. With no PATH the ``live_sources`` setting (``SKILLREACH_LIVE_SOURCES``)
names what to read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

__all__ = ["register"]


def ingest_cmd(
    paths: list[Path] = typer.Argument(
        None,
        metavar="[PATH]...",
        help="Transcript folders (~/.claude/projects), transcript files or OpenTelemetry file exports "
        "(default: the live_sources setting, SKILLREACH_LIVE_SOURCES).",
    ),
    skills: Path | None = typer.Option(
        None,
        "--skills",
        metavar="DIR",
        help="The skills folder, inside its git repository: each skill call gets the version of the skill "
        "in force then (git:<tree hash>, as baselines pin it); without it only a 'Base directory for this "
        "skill' folder gives one, else 'unknown'.",
    ),
    keep_prompts: bool = typer.Option(
        False,
        "--keep-prompts",
        help="Store the prompts' text too (redacted); by default ids and counts only.",
    ),
    as_json: bool = typer.Option(False, "--json", help="The summary as JSON on stdout alone."),
) -> None:
    """Read new prompts and skill calls from agents' transcripts and OpenTelemetry exports into the
    store, incrementally. Exit codes: 0 done (bad lines are skipped, counted and named); 2 bad input (a
    PATH that does not exist, no PATH and no live_sources, a --skills that is not a folder)."""
    from skillreach.errors import InputError
    from skillreach.live.ingest import ingest_sources
    from skillreach.settings import load_settings
    from skillreach.store import open_store

    settings = load_settings()
    sources = list(paths or []) or settings.live_source_paths()
    if not sources:
        raise InputError(
            "nothing to read: name transcript folders or OpenTelemetry exports (skillreach ingest "
            "PATH...), or set SKILLREACH_LIVE_SOURCES (paths separated by ':')"
        )
    for p in sources:
        if not p.exists():
            raise InputError(
                f"{p}: no such file or folder; name a transcript folder (~/.claude/projects) or "
                "an OpenTelemetry file export"
            )
    if skills is not None and not skills.is_dir():
        raise InputError(f"--skills {skills}: not a folder; name the folder holding the skills")
    with open_store(settings) as store:
        summary = ingest_sources(
            sources,
            store,
            skills_root=skills,
            keep_prompts=keep_prompts,
            progress=not as_json and sys.stderr.isatty(),
        )
    from skillreach._io.console import escape, escape_json
    from skillreach._io.redact import redact, redact_text

    if as_json:
        sys.stdout.write(
            escape_json(json.dumps(redact(summary.as_dict(), keys=False), indent=2, ensure_ascii=False))
            + "\n"
        )
        return

    for line in summary.lines():
        print(escape(redact_text(line)))  # paths named in it are the user's files


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest_cmd)
