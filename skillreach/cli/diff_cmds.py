"""``skillreach diff A B``: did my edit help, or is it noise? A paired A/B comparison of two studies.

Runs the ``diff`` flow (``flows/diff.py``): a tracked Prefect flow run when a server answers
(``PREFECT_API_URL``), in-process otherwise. Exit 0 done, 2 bad input, 3 refused (a wall, or arms that
differ in more than ``--vary`` says, without ``--force``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

__all__ = ["register", "run_diff"]


def run_diff(use_prefect: bool | None = None, *, probe: bool = False, **params: Any) -> Any:
    """Run the diff flow (``probe``: the probed-diff flow): tracked by Prefect when a server answers,
    in-process otherwise."""
    import asyncio  # here, not at the top: the CLI starts without it

    from skillreach.cli.run_cmds import prefect_server_up
    from skillreach.flows.diff import diff, probed_diff

    flow: Any = probed_diff if probe else diff
    if use_prefect is None:
        use_prefect = prefect_server_up() is not None
    return asyncio.run(flow(**params) if use_prefect else flow.fn(**params))


def diff_cmd(  # noqa: PLR0917 - typer passes options positionally
    a: Path = typer.Argument(..., metavar="A", help="Study folder of the baseline arm (artifact.json)."),
    b: Path = typer.Argument(..., metavar="B", help="Study folder of the changed arm."),
    vary: str | None = typer.Option(
        None,
        "--vary",
        metavar="AXIS",
        help="What was meant to change: description, rival, scope, runtime or model. The pins and "
        "digests of both arms are checked; anything else that moved refuses the diff (exit 3).",
    ),
    force: bool = typer.Option(False, "--force", help="Report even when more than --vary moved (warned)."),
    skill: str | None = typer.Option(
        None,
        "--skill",
        metavar="NAME",
        help="The skill under edit: its description is 'description', other skills' edits are 'rival'.",
    ),
    queries: Path | None = typer.Option(
        None, "--queries", metavar="FILE", help="The sealed query set both arms ran, to show query texts."
    ),
    as_json: bool = typer.Option(False, "--json", help="The diff as JSON on stdout alone."),
    html: Path | None = typer.Option(None, "--html", metavar="FILE", help="Write the HTML page here."),
    markdown: Path | None = typer.Option(
        None, "--markdown", metavar="FILE", help="Write a markdown summary here (a PR comment)."
    ),
    resamples: int = typer.Option(2000, "--resamples", min=100, metavar="N", help="Bootstrap resamples."),
    seed: int = typer.Option(0, "--seed", metavar="N", help="Seed of the bootstrap and of the stage order."),
    staged: bool = typer.Option(
        False,
        "--staged",
        help="Also test Δ top-1 in stages (O'Brien–Fleming α-spending over --looks): where a staged "
        "comparison stops, its verdict and the probes it saves.",
    ),
    looks: int = typer.Option(
        4, "--looks", min=1, metavar="K", help="Planned looks of --staged (fewer with under 2 queries each)."
    ),
    probe_skills: list[Path] = typer.Option(
        [],
        "--probe-skills",
        metavar="DIR",
        help="Probe arm B instead of reading it: A's study (query set, runtime, model snapshot, attempts, "
        "options from A/study.json) with the skills in DIR (repeatable), into folder B. With --staged it "
        "probes stage by stage and stops as soon as Δ top-1 is decided. A re-run resumes.",
    ),
    fail_on: str | None = typer.Option(
        None,
        "--fail-on",
        metavar="worse",
        help="worse: exit 1 when B is worse (Δ top-1 below 0) or one skill's recall fell significantly.",
    ),
) -> None:
    """Compare two studies of the same sealed query set, paired over queries: Δ top-1, Δ reachability,
    Δ macro-F1 with 95 % intervals, McNemar's exact test, per-skill Δ recall / precision and the
    queries that flipped (won, lost, stolen from neighbours). The first line names the skill that lost
    significantly, when one did.

    Exit codes: 0 compared; 1 worse under --fail-on worse; 2 bad input; 3 refused (the arms differ in
    more than --vary)."""
    from rich.console import Console

    from skillreach.author.diff import AXES
    from skillreach.errors import InputError

    if fail_on not in (None, "worse"):
        raise InputError(f"--fail-on {fail_on}: the one condition is worse")

    if vary is not None and vary not in AXES:
        raise InputError(f"--vary {vary}: use one of {', '.join(AXES)}")
    for arm in (a,) if probe_skills else (a, b):
        if not arm.exists():
            raise InputError(f"{arm}: no such study folder; pass a folder written by skillreach run")
    for folder in probe_skills:
        if not folder.is_dir():
            raise InputError(f"--probe-skills {folder}: no such folder; pass the skills folder of arm B")
    if queries is not None and not queries.is_file():
        raise InputError(f"--queries {queries}: no such file")
    probed: dict[str, Any] = {}
    if probe_skills:
        from skillreach.study import StudyConfig

        probed = {"probe": True, "skills": list(probe_skills), "secrets_from": StudyConfig.build()}
    result = run_diff(
        **probed,
        a=a,
        b=b,
        vary=vary,
        force=force,
        skill=skill,
        queries=queries,
        html=html,
        markdown=markdown,
        resamples=resamples,
        seed=seed,
        looks=(looks if staged else 1) if probe_skills else (looks if staged else None),
    )
    if probe_skills and not staged:
        result = result.model_copy(update={"staged": None})
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        _fail_on(result, fail_on)
        return
    from skillreach.reports.diff import print_diff

    console = Console()
    if not console.is_terminal:  # piped: 80 columns by default, too narrow for the intervals
        console = Console(width=max(console.width, 120))
    print_diff(result, console)
    for label, path in (("html", html), ("markdown", markdown)):
        if path is not None:
            console.print(f"  {label:9} {path}")
    _fail_on(result, fail_on)


def _fail_on(result: Any, fail_on: str | None) -> None:
    """``--fail-on worse``: exit 1 when B is worse overall or one skill lost significantly."""
    if fail_on != "worse":
        return
    loss = result.loss_line()
    if result.verdict == "worse" or loss is not None:
        from skillreach.errors import GateFailed

        raise GateFailed("diff: B is worse" + (f" — {loss}" if loss else " (Δ top-1 below 0)"))


def register(app: typer.Typer) -> None:
    app.command("diff")(diff_cmd)
