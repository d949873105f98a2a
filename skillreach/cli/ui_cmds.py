"""``skillreach ui``: the team's dashboard (:mod:`skillreach.ui`), served until Ctrl-C."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

__all__ = ["register"]


def ui_cmd(  # noqa: PLR0917 - a typer command: one parameter per option
    port: int = typer.Option(8420, "--port", min=1, max=65535, help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: every address)."),
    allow_writes: bool = typer.Option(
        False,
        "--allow-writes",
        help="Let a person accept a candidate as a skill's bar from the Decisions page (the commit "
        "`baseline accept` writes, with their name and reason). Prints a session link with a token; "
        "a write without it is refused. Read-only by default.",
    ),
    baselines_dir: Path | None = typer.Option(
        None, "--baselines", help="Folder of stored baselines (default: setting baselines_dir)."
    ),
    branch: str | None = typer.Option(
        None, "--branch", help="The service's baseline branch (default: setting baselines_branch)."
    ),
    skills: list[Path] = typer.Option(
        [], "--skills", metavar="DIR",
        help="Skills folder(s): their git history marks the charts (default: ./skills).",
    ),
    config: Path | None = typer.Option(
        None, "--config", help="Settings file (the store, gates, live gates)."
    ),
) -> None:
    """The team's dashboard: skills and their bars, each skill's history broken at every pin change, runs
    with their reports and every probe's trajectory, two runs compared, the agents' matrix, decisions.

    Reads the store (SKILLREACH_DATABASE_URL, else .skillreach/skillreach.db), the baselines in git and the
    run folders. Exit codes: 0 stopped; 2 bad input (a port in use, a store that cannot be opened)."""
    from skillreach.settings import load_settings
    from skillreach.ui.server import build, check_port, serve_foreground

    settings = load_settings(config)
    check_port(host, port)
    dashboard = build(settings, host=host, port=port, writes=allow_writes, baselines_dir=baselines_dir,
                      branch=branch, skills_dirs=skills)
    raise typer.Exit(serve_foreground(dashboard, lambda line: print(line, file=sys.stderr, flush=True)))


def register(app: typer.Typer) -> None:
    app.command("ui")(ui_cmd)
